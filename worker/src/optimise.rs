//! Branch and bound: the [`Optimise`] trait beside [`Tree`], the incumbent a process's threads
//! share, and the [`Goal`] through which a search prunes (or, for plain trees, does not).

use crate::{Records, Tree};
use bts_protocol::{Incumbent, NO_VALUE, Solution};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// A tree whose nodes may be feasible solutions of a maximisation problem.
///
/// bts keeps the best value found so far (the incumbent), shared by every worker thread, process
/// and job, and prunes every node whose [`bound`](Optimise::bound) cannot beat it: a pruned node is
/// neither visited nor returned. The final optimum is exact whatever the order, worker count or
/// mode; node counts depend on when improvements were found, so they vary between runs.
///
/// Values are `i64`, greater than `i64::MIN`. To minimise a cost, maximise its negation: return
/// `-cost` as the value and `-lower_bound` as the bound.
///
/// The record of a solution is its node's [`Tree::output`]; the run writes the best solution's
/// record (every optimal one with `--all-best`) when it ends, instead of every visited node's. A
/// tree without an `output` has empty records: the output is an empty line, and every optimal
/// solution the same one.
///
/// # Example
/// The best subset of numbers whose sum stays within a capacity (a subset-sum knapsack):
/// ```
/// # use bts_worker as bts; // the doctest lives in the crate that `bts` re-exports
/// use bts::{Optimise, Tree};
///
/// struct SubsetSum { items: Vec<i64>, capacity: i64 }
///
/// /// The items decided so far (taken or not, in order) and the sum of those taken.
/// #[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
/// struct Partial { next: usize, taken: Vec<usize>, sum: i64 }
///
/// impl Tree for SubsetSum {
///     type Node = Partial;
///     type Children<'a> = std::vec::IntoIter<Partial>;
///
///     fn root(&self) -> Partial { Partial { next: 0, taken: Vec::new(), sum: 0 } }
///
///     fn children<'a>(&'a self, p: &Partial, _depth: u32) -> Self::Children<'a> {
///         let mut children = Vec::new();
///         if let Some(&item) = self.items.get(p.next) {
///             if p.sum + item <= self.capacity {
///                 let mut taken = p.taken.clone();
///                 taken.push(p.next);
///                 children.push(Partial { next: p.next + 1, taken, sum: p.sum + item });
///             }
///             children.push(Partial { next: p.next + 1, ..p.clone() });
///         }
///         children.into_iter()
///     }
///
///     fn output(&self, p: &Partial, _depth: u32, out: &mut String) -> bool {
///         out.push_str(&format!("{} {:?}", p.sum, p.taken));
///         true
///     }
/// }
///
/// impl Optimise for SubsetSum {
///     fn value(&self, p: &Partial, _depth: u32) -> Option<i64> { Some(p.sum) }
///
///     fn bound(&self, p: &Partial, _depth: u32) -> i64 {
///         let rest: i64 = self.items[p.next..].iter().sum();
///         (p.sum + rest).min(self.capacity)
///     }
/// }
/// ```
pub trait Optimise: Tree {
    /// The value of `node` if it is a feasible solution.
    fn value(&self, node: &Self::Node, depth: u32) -> Option<i64>;

    /// An upper bound on the value of every solution in `node`'s subtree, `node` included. bts
    /// prunes by it without checking it: a bound below a solution's value loses that solution, and
    /// the run reports a smaller optimum as complete.
    fn bound(&self, node: &Self::Node, depth: u32) -> i64;

    /// True when every node's children come in non-increasing order of bound (as MCS orders them
    /// by colour): once a child is pruned, its later siblings are pruned too, without being
    /// generated or counted.
    const BOUNDS_DESCEND: bool = false;
}

/// The best value a process knows, shared by its threads.
///
/// # Why a pruned subtree never loses the optimum
/// A solution that beats this value is reported with the job that found it, in the same batch. A
/// committed job that passed over an optimal solution (pruned it, or visited it without reporting
/// it) did so because an equal value was here, found by a job of the same process. If that job is
/// committed, so is its record; if it is lost, its process died after the first job was
/// committed, and the lost job's subtree is searched again later: the same argument applies to
/// its solution, at a later moment. Processes die finitely often, so some committed job reports an
/// optimal solution. (Random polling rolls back every worker of a lost process alike; a worker
/// whose work is rolled back or done twice, as its start's groups do, still reports the solutions
/// it offered, and the coordinator takes them.)
#[derive(Debug)]
pub struct SharedIncumbent {
    value: AtomicI64,
    keep_ties: AtomicBool,
    /// The run's target ([`NO_VALUE`] when it has none).
    target: AtomicI64,
}

impl Default for SharedIncumbent {
    fn default() -> Self {
        Self { value: AtomicI64::new(NO_VALUE), keep_ties: AtomicBool::new(false), target: AtomicI64::new(NO_VALUE) }
    }
}

impl SharedIncumbent {
    /// The value to beat: one relaxed load, on the hot path.
    pub fn value(&self) -> i64 {
        self.value.load(Ordering::Relaxed)
    }

    /// Takes what the master knows (from a job or its broadcast).
    pub fn raise(&self, incumbent: Incumbent) {
        self.keep_ties.store(incumbent.keep_ties, Ordering::Relaxed);
        self.target.store(incumbent.target.unwrap_or(NO_VALUE), Ordering::Relaxed);
        self.value.fetch_max(incumbent.value, Ordering::Relaxed);
    }

    /// Whether a subtree bounded by `bound` must be searched.
    fn admits(&self, bound: i64) -> bool {
        let value = self.value();
        bound > value || (bound == value && self.keep_ties.load(Ordering::Relaxed))
    }

    /// Offers a solution of `value`; if it beats the incumbent (or ties it with `--all-best`), its
    /// record is made by `record` and the solution returned, for the job to report.
    fn offer(&self, value: i64, record: impl FnOnce() -> Vec<u8>) -> Option<Solution> {
        if value == NO_VALUE || !self.admits(value) {
            return None;
        }
        self.value.fetch_max(value, Ordering::Relaxed);
        tracing::debug!(value, "found a better solution");
        Some(Solution { value, record: record() })
    }

    /// Whether the incumbent reaches the run's target: searching on is wasted.
    pub fn target_reached(&self) -> bool {
        self.reaches_target(self.value())
    }

    /// Whether a solution of `value` reaches the run's target.
    fn reaches_target(&self, value: i64) -> bool {
        let target = self.target.load(Ordering::Relaxed);
        target != NO_VALUE && value >= target
    }
}

/// What visiting a node gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    Nothing,
    /// An output record.
    Record,
    /// A solution that reaches the run's target (`--target`): the job ends at once, handing back
    /// the rest of its search as if its budget were spent, so that the run stops without waiting.
    Target,
}

impl Visit {
    /// A record if `had` one.
    #[inline(always)]
    pub fn record_if(had: bool) -> Visit {
        if had { Visit::Record } else { Visit::Nothing }
    }
}

/// What a search does besides enumerating: nothing for a plain [`Tree`], pruning and collecting
/// solutions for an [`Optimise`] one.
pub trait Goal<T: Tree + ?Sized>: Send + Sync + 'static {
    /// Whether `node` (not yet visited) must be searched; false prunes it.
    fn admits(&self, tree: &T, node: &T::Node, depth: u32) -> bool;

    /// Visits `node`: hands its output record to `out` (a plain tree), or offers it as a solution,
    /// pushing it to `found` if it beats the incumbent.
    fn visit(&self, tree: &T, node: &T::Node, depth: u32, out: &mut impl Records, found: &mut Vec<Solution>) -> Visit;

    /// As [`visit`](Goal::visit), taking the node and giving it back. A goal that rarely needs the
    /// node in memory (a branch and bound offers few solutions) passes it by value to an
    /// out-of-line function when it does, so that the search keeps the node in registers.
    #[inline(always)]
    fn visit_owned(
        &self,
        tree: &T,
        node: T::Node,
        depth: u32,
        out: &mut impl Records,
        found: &mut Vec<Solution>,
    ) -> (T::Node, Visit) {
        let visit = self.visit(tree, &node, depth, out, found);
        (node, visit)
    }

    /// The process's incumbent, for a branch and bound.
    fn incumbent(&self) -> Option<&SharedIncumbent> {
        None
    }

    /// The same goal with an incumbent of its own (see `RunnerSettings::detached`).
    fn detached(&self) -> Self
    where
        Self: Sized;

    /// A pruned node's later siblings are pruned too (see [`Optimise::BOUNDS_DESCEND`]).
    fn prunes_later_siblings(&self) -> bool {
        false
    }
}

/// A goal that visits as `G` does and prunes nothing.
pub(crate) struct Unpruned<G>(pub Arc<G>);

impl<T: Tree + ?Sized, G: Goal<T>> Goal<T> for Unpruned<G> {
    fn admits(&self, _tree: &T, _node: &T::Node, _depth: u32) -> bool {
        true
    }

    fn visit(&self, tree: &T, node: &T::Node, depth: u32, out: &mut impl Records, found: &mut Vec<Solution>) -> Visit {
        self.0.visit(tree, node, depth, out, found)
    }

    fn detached(&self) -> Self {
        Unpruned(Arc::new(self.0.detached()))
    }
}

/// The goal of a plain enumeration: every node is visited and writes its record.
#[derive(Clone, Copy, Debug, Default)]
pub struct Enumerate;

impl<T: Tree + ?Sized> Goal<T> for Enumerate {
    #[inline(always)]
    fn admits(&self, _tree: &T, _node: &T::Node, _depth: u32) -> bool {
        true
    }

    #[inline(always)]
    fn visit(&self, tree: &T, node: &T::Node, depth: u32, out: &mut impl Records, _: &mut Vec<Solution>) -> Visit {
        Visit::record_if(out.record(tree, node, depth))
    }

    fn detached(&self) -> Self {
        Enumerate
    }
}

/// The goal of a branch and bound: prune what cannot beat the process's incumbent.
#[derive(Debug, Default)]
pub struct Maximise(pub SharedIncumbent);

impl<T: Optimise + ?Sized> Goal<T> for Maximise {
    #[inline(always)]
    fn admits(&self, tree: &T, node: &T::Node, depth: u32) -> bool {
        self.0.value() == NO_VALUE || self.0.admits(tree.bound(node, depth))
    }

    #[inline(always)]
    fn visit(&self, tree: &T, node: &T::Node, depth: u32, _: &mut impl Records, found: &mut Vec<Solution>) -> Visit {
        match tree.value(node, depth) {
            Some(value) if self.0.admits(value) => offer(&self.0, tree, node, value, depth, found),
            _ => Visit::Nothing,
        }
    }

    #[inline(always)]
    fn visit_owned(
        &self,
        tree: &T,
        node: T::Node,
        depth: u32,
        _: &mut impl Records,
        found: &mut Vec<Solution>,
    ) -> (T::Node, Visit) {
        match tree.value(&node, depth) {
            Some(value) if self.0.admits(value) => offered(&self.0, tree, node, value, depth, found),
            _ => (node, Visit::Nothing),
        }
    }

    fn incumbent(&self) -> Option<&SharedIncumbent> {
        Some(&self.0)
    }

    fn prunes_later_siblings(&self) -> bool {
        T::BOUNDS_DESCEND
    }

    fn detached(&self) -> Self {
        Maximise::default()
    }
}

/// The record of `node`, as a solution carries it.
fn record<T: Optimise + ?Sized>(tree: &T, node: &T::Node, depth: u32) -> Vec<u8> {
    let mut text = String::new();
    tree.output(node, depth, &mut text);
    crate::dfs::check_one_line(text.as_bytes());
    text.into_bytes()
}

/// Offers `node`, of `value`, and gives it back. Out of line and by value: the node goes to
/// memory here only, not on the search's hot path.
#[cold]
#[inline(never)]
fn offered<T: Optimise + ?Sized>(
    incumbent: &SharedIncumbent,
    tree: &T,
    node: T::Node,
    value: i64,
    depth: u32,
    found: &mut Vec<Solution>,
) -> (T::Node, Visit) {
    let visit = offer(incumbent, tree, &node, value, depth, found);
    (node, visit)
}

/// Offers `node`, of `value`: out of line, off the search's hot path.
#[cold]
#[inline(never)]
fn offer<T: Optimise + ?Sized>(
    incumbent: &SharedIncumbent,
    tree: &T,
    node: &T::Node,
    value: i64,
    depth: u32,
    found: &mut Vec<Solution>,
) -> Visit {
    found.extend(incumbent.offer(value, || record(tree, node, depth)));
    if incumbent.reaches_target(value) { Visit::Target } else { Visit::Nothing }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_solution_counts_only_when_it_beats_the_incumbent() {
        let shared = SharedIncumbent::default();
        assert!(shared.offer(5, || b"five".to_vec()).is_some());
        assert!(shared.offer(5, || b"again".to_vec()).is_none());
        assert!(shared.offer(4, || b"four".to_vec()).is_none());
        assert_eq!(shared.value(), 5);
        shared.raise(Incumbent { value: 3, ..Incumbent::NONE });
        assert_eq!(shared.value(), 5);
    }

    #[test]
    fn ties_are_kept_only_when_asked() {
        let shared = SharedIncumbent::default();
        shared.raise(Incumbent { value: 7, keep_ties: true, target: None });
        assert!(shared.admits(7) && !shared.admits(6));
        assert!(shared.offer(7, || b"tie".to_vec()).is_some());
        shared.raise(Incumbent { value: 7, ..Incumbent::NONE });
        assert!(!shared.admits(7) && shared.admits(8));
    }
}
