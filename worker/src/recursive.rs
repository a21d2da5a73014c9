//! Trees that search below a node by recursion of their own, as a hand-written sequential program
//! does: bts keeps the budget, the depth limit, the incumbent and the frontier through a [`Scope`].

use crate::Tree;
use crate::dfs::{ABORT_CHECK, Job, JobStats, Records, next_slice};
use crate::optimise::{Goal, Visit};
use bts_protocol::Solution;

/// A [`Tree`] that searches below a node itself, by plain recursion.
///
/// [`search`](crate::search) walks a tree through its children iterators, kept on a stack: every
/// step goes through memory. A recursive search, as the fastest sequential branch and bounds are
/// written, keeps a node's few numbers in registers (the built-in knapsack's jobs run 12 to 15%
/// faster this way). bts still does the rest: each child is offered to [`Scope::enter`], which
/// prunes it, hands it back as part of the job's frontier (budget spent or depth limit), or
/// visits it.
///
/// An implementation must offer exactly the children [`Tree::children`] gives, in the same order:
/// random polling and progress estimates still walk the tree through them, and a job's frontier
/// must be what they would return. [`TreeSearcher::recursive`](crate::TreeSearcher::recursive) makes
/// budget-mode jobs use it.
///
/// # Example
/// The default is the plain recursion, which a tree writes out to keep its state in registers:
/// ```
/// # use bts_worker as bts; // the doctest lives in the crate that `bts` re-exports
/// use bts::{Entry, Recursive, Scope, Tree};
///
/// /// Binary strings of length up to `n`.
/// struct Strings { n: u32 }
///
/// impl Tree for Strings {
///     type Node = u64;
///     type Children<'a> = std::vec::IntoIter<u64>;
///     fn root(&self) -> u64 { 1 }
///     fn children<'a>(&'a self, s: &u64, depth: u32) -> Self::Children<'a> {
///         if depth < self.n { vec![2 * s, 2 * s + 1].into_iter() } else { Vec::new().into_iter() }
///     }
/// }
///
/// impl Recursive for Strings {
///     fn search_below(&self, s: u64, depth: u32, scope: &mut impl Scope<Self>) {
///         if depth == self.n {
///             return;
///         }
///         for child in [2 * s, 2 * s + 1] {
///             match scope.enter(&child, depth + 1) {
///                 Entry::Visited => self.search_below(child, depth + 1, scope),
///                 Entry::Skipped => {}
///                 Entry::Done => return,
///             }
///         }
///     }
/// }
/// ```
pub trait Recursive: Tree {
    /// How many levels below its start node a job goes by recursion. Each level takes a stack
    /// frame, and worker threads have stacks of 2 MiB: the default leaves a frame 1 KiB. A
    /// recursion with larger frames sets a smaller value (a stack overflow aborts the process).
    /// The job ends at the first node deeper, as if its budget were spent there: that node and the
    /// rest of the frontier go back as jobs, and the next job carries on from it (a job that went
    /// on above it would search on without what lies below, a branch and bound without its
    /// solutions).
    const MAX_RECURSION: u32 = 1024;

    /// Searches below `node`, which lies at `depth` and has been visited: offers each of its
    /// children to `scope` in order, and searches below each child the scope visits.
    #[inline]
    fn search_below(&self, node: Self::Node, depth: u32, scope: &mut impl Scope<Self>) {
        for child in self.children_owned(node, depth) {
            match scope.enter(&child, depth + 1) {
                Entry::Visited => self.search_below(child, depth + 1, scope),
                Entry::Skipped => {}
                Entry::Done => return,
            }
        }
    }
}

/// What became of a child offered to [`Scope::enter`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    /// Visited: search below it.
    Visited,
    /// Pruned, or handed back unvisited: go on with its next sibling.
    Skipped,
    /// Pruned, and so are its later siblings (their bounds are no higher: see
    /// [`Optimise::BOUNDS_DESCEND`](crate::Optimise::BOUNDS_DESCEND)): offer no more of them.
    Done,
}

/// The job a [`Recursive`] search runs in.
pub trait Scope<T: Tree + ?Sized> {
    /// Offers `child`, at `depth`, to the job: the goal may prune it; past the budget or the depth
    /// limit it is handed back (a copy of it); otherwise it is visited.
    fn enter(&mut self, child: &T::Node, depth: u32) -> Entry;
}

/// As [`search_with`](crate::search_with), by the tree's own recursion: the same nodes are
/// visited, pruned and returned, in the same order, with the same statistics (within
/// [`Recursive::MAX_RECURSION`] levels of the start node).
pub fn search_recursive<T: Recursive + ?Sized, G: Goal<T>>(
    tree: &T,
    goal: &G,
    job: Job<'_, T::Node>,
    out: &mut impl Records,
    found: &mut Vec<Solution>,
    returned: &mut impl FnMut(T::Node, u32),
) -> JobStats
where
    T::Node: Clone,
{
    let Job { start, depth, limits, abort } = job;
    if !goal.admits(tree, start, depth) {
        return JobStats { max_depth: depth, pruned: 1, ..JobStats::default() };
    }
    let budget = limits.budget.max(1);
    // The first look after ABORT_CHECK nodes, the start node among them, as the loop does.
    let left = (budget - 1).min(ABORT_CHECK - 1);
    let depth_limit = limits.max_depth.unwrap_or(u32::MAX);
    let mut scope = JobScope {
        tree,
        goal,
        left,
        reserve: budget - 1 - left,
        abort,
        cut: 0,
        depth_limit,
        max_depth: depth_limit.min(depth.saturating_add(T::MAX_RECURSION)),
        deepest: depth,
        leaves: 0,
        pruned: 0,
        outputs: 0,
        open: depth + 1,
        skip_rest: goal.prunes_later_siblings(),
        out,
        found,
        returned,
    };
    let visit = goal.visit(tree, start, depth, scope.out, scope.found);
    scope.took(visit);
    tree.search_below(start.clone(), depth, &mut scope);
    JobStats {
        visited: budget - scope.left - scope.reserve - scope.cut,
        leaves: scope.leaves + u64::from(scope.open != 0),
        max_depth: scope.deepest,
        outputs: scope.outputs,
        pruned: scope.pruned,
    }
}

struct JobScope<'a, T: ?Sized, G, R, F> {
    tree: &'a T,
    goal: &'a G,
    /// How many more nodes the job may visit before it looks at `abort`...
    left: u64,
    /// ... and after.
    reserve: u64,
    abort: Option<&'a std::sync::atomic::AtomicBool>,
    /// What was left when a solution reached the target, or the recursion its depth, and ended the
    /// job.
    cut: u64,
    /// The job's depth limit.
    depth_limit: u32,
    /// The depth the job goes to: its depth limit, or as deep as its recursion goes.
    max_depth: u32,
    /// The depth of the deepest node visited.
    deepest: u32,
    leaves: u64,
    pruned: u64,
    outputs: u64,
    /// One more than the depth of the last visited node while none of its children has been
    /// visited or handed back, else 0: a node still open when the search moves elsewhere is a leaf.
    open: u32,
    skip_rest: bool,
    out: &'a mut R,
    found: &'a mut Vec<Solution>,
    returned: &'a mut F,
}

impl<T, G, R, F> Scope<T> for JobScope<'_, T, G, R, F>
where
    T: Tree + ?Sized,
    T::Node: Clone,
    G: Goal<T>,
    R: Records,
    F: FnMut(T::Node, u32),
{
    #[inline(always)]
    fn enter(&mut self, child: &T::Node, depth: u32) -> Entry {
        if !self.goal.admits(self.tree, child, depth) {
            self.pruned += 1;
            return if self.skip_rest { Entry::Done } else { Entry::Skipped };
        }
        // The last visited node is a leaf unless this is one of its children.
        self.leaves += u64::from(self.open > depth);
        if (self.left == 0 && !self.goes_on()) || depth > self.max_depth {
            self.open = 0;
            if depth <= self.depth_limit {
                self.end();
            }
            hand_back(self.returned, child, depth);
            return Entry::Skipped;
        }
        self.left -= 1;
        self.open = depth + 1;
        self.deepest = self.deepest.max(depth);
        let visit = self.goal.visit(self.tree, child, depth, self.out, self.found);
        self.took(visit);
        Entry::Visited
    }
}

impl<T: ?Sized, G, R, F> JobScope<'_, T, G, R, F> {
    /// Counts what a visit gave; a solution that reaches the target ends the job.
    #[inline(always)]
    fn took(&mut self, visit: Visit) {
        match visit {
            Visit::Nothing => {}
            Visit::Record => self.outputs += 1,
            Visit::Target => self.end(),
        }
    }

    /// Ends the job: what is left of the budget goes unspent.
    #[cold]
    fn end(&mut self) {
        (self.cut, self.left, self.reserve) = (self.cut + self.left + self.reserve, 0, 0);
    }

    /// Takes the next [`ABORT_CHECK`] nodes of the budget, unless it is spent or the job is told
    /// to end (then it is spent).
    #[inline(always)]
    fn goes_on(&mut self) -> bool {
        match next_slice(self.reserve, self.abort) {
            Some(slice) => {
                (self.left, self.reserve) = (slice, self.reserve - slice);
                true
            }
            None => {
                (self.cut, self.reserve) = (self.cut + self.reserve, 0);
                false
            }
        }
    }
}

/// Hands `child` back unvisited: out of line, off the search's hot path (a job hands back a few
/// nodes and visits many).
#[cold]
#[inline(never)]
fn hand_back<N: Clone>(returned: &mut impl FnMut(N, u32), child: &N, depth: u32) {
    returned(child.clone(), depth);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Explicit, random_tree};
    use crate::{Limits, search_with};
    use proptest::prelude::*;

    /// Visits every node (its id is its record) and prunes the ids that are multiples of `every`;
    /// with `skip_rest`, a pruned node's later siblings too. Node `target` reaches the target.
    struct Pruning {
        every: u32,
        skip_rest: bool,
        target: u32,
    }

    impl Goal<Explicit> for Pruning {
        fn admits(&self, _: &Explicit, node: &u32, _: u32) -> bool {
            *node == 0 || !node.is_multiple_of(self.every)
        }

        fn visit(
            &self,
            tree: &Explicit,
            node: &u32,
            depth: u32,
            out: &mut impl Records,
            _: &mut Vec<Solution>,
        ) -> Visit {
            match out.record(tree, node, depth) {
                _ if *node == self.target => Visit::Target,
                had => Visit::record_if(had),
            }
        }

        fn detached(&self) -> Self {
            Pruning { ..*self }
        }

        fn prunes_later_siblings(&self) -> bool {
            self.skip_rest
        }
    }

    /// One job both ways: (records, returned nodes, statistics) of the loop, then of the recursion.
    type Outcome = (String, Vec<(u32, u32)>, JobStats);

    fn both<T: Recursive<Node = u32>, G: Goal<T>>(
        tree: &T,
        goal: &G,
        start: u32,
        depth: u32,
        limits: Limits,
    ) -> [Outcome; 2] {
        both_or_aborted(tree, goal, start, depth, limits, None)
    }

    fn both_or_aborted<T: Recursive<Node = u32>, G: Goal<T>>(
        tree: &T,
        goal: &G,
        start: u32,
        depth: u32,
        limits: Limits,
        abort: Option<&std::sync::atomic::AtomicBool>,
    ) -> [Outcome; 2] {
        let (mut out, mut back) = (String::new(), Vec::new());
        let job = Job { start: &start, depth, limits, abort };
        let stats = search_with(tree, goal, job, &mut out, &mut Vec::new(), &mut |n, d| back.push((n, d)));
        let looped = (out, back, stats);
        let (mut out, mut back) = (String::new(), Vec::new());
        let job = Job { start: &start, depth, limits, abort };
        let stats = search_recursive(tree, goal, job, &mut out, &mut Vec::new(), &mut |n, d| back.push((n, d)));
        [looped, (out, back, stats)]
    }

    proptest! {
        /// The recursion visits, prunes and returns what the loop does, in the same order, with
        /// the same statistics, whatever the budget, depth limit, start node and pruning.
        #[test]
        fn the_recursion_searches_a_job_as_the_loop_does(
            parents in proptest::collection::vec(any::<usize>(), 0..200),
            budget in 1u64..40,
            limit in proptest::option::of(0u32..6),
            start in any::<usize>(),
            every in 2u32..8,
            prune in any::<bool>(),
            skip_rest in any::<bool>(),
            target in any::<u32>(),
        ) {
            let tree = random_tree(&parents);
            let start = (start % tree.0.len()) as u32;
            // The start node's depth, by walking up from it.
            let parent = |c: u32| (0..tree.0.len()).find(|&p| tree.0[p].contains(&c)).unwrap() as u32;
            let (mut depth, mut node) = (0, start);
            while node != 0 {
                node = parent(node);
                depth += 1;
            }
            let limits = Limits { budget, max_depth: limit.map(|l| depth + l) };
            // With pruning, a node reaches the target and ends the job: nothing is visited after it.
            let target = target % tree.0.len() as u32;
            let [looped, recursive] = if prune {
                both(&tree, &Pruning { every, skip_rest, target }, start, depth, limits)
            } else {
                both(&tree, &crate::Enumerate, start, depth, limits)
            };
            if prune && let Some(at) = looped.0.lines().position(|id| id == target.to_string()) {
                prop_assert_eq!(at + 1, looped.0.lines().count());
            }
            prop_assert_eq!(recursive, looped);
        }
    }

    /// A random tree of 12,001 nodes, and its nodes in depth-first order (found by a walk of its
    /// own).
    fn big_tree() -> (Explicit, Vec<u32>) {
        let mut x = 1u64;
        let parents: Vec<usize> = (0..12_000)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (x >> 33) as usize
            })
            .collect();
        let tree = random_tree(&parents);
        let (mut order, mut stack) = (Vec::new(), vec![0u32]);
        while let Some(n) = stack.pop() {
            order.push(n);
            stack.extend(tree.0[n as usize].iter().rev());
        }
        (tree, order)
    }

    /// A job stops every ABORT_CHECK nodes to look at its abort flag: unset, the pauses change
    /// nothing, in the loop and the recursion alike, for budgets on either side of them, and with a
    /// node that reaches the target.
    #[test]
    fn pauses_to_look_at_the_abort_flag_change_nothing() {
        let (tree, order) = big_tree();
        let n = order.len() as u64;
        let c = crate::dfs::ABORT_CHECK;
        for budget in [c - 1, c, c + 1, 2 * c - 1, 2 * c, 2 * c + 1, 10_000, n, u64::MAX] {
            let [looped, recursive] = both(&tree, &crate::Enumerate, 0, 0, Limits { budget, max_depth: None });
            let visited: Vec<u32> = looped.0.lines().map(|l| l.parse().unwrap()).collect();
            assert_eq!(visited, order[..budget.min(n) as usize], "budget {budget}");
            assert_eq!(looped.2.visited, budget.min(n));
            assert_eq!(recursive, looped, "budget {budget}");
        }
        // Node 0 alone is pruned: no other node is a multiple of u32::MAX.
        let target = order[5000];
        let goal = Pruning { every: u32::MAX, skip_rest: false, target };
        let [looped, recursive] = both(&tree, &goal, 0, 0, Limits::UNLIMITED);
        assert_eq!((looped.2.visited, looped.0.lines().last()), (5001, Some(&*target.to_string())));
        assert_eq!(recursive, looped);
    }

    /// A job told to end ends at its next look: it has visited a multiple of ABORT_CHECK nodes
    /// (or its budget), and hands the rest back as if its budget were spent.
    #[test]
    fn a_job_told_to_end_ends_at_its_next_look() {
        let (tree, order) = big_tree();
        let abort = std::sync::atomic::AtomicBool::new(true);
        let c = crate::dfs::ABORT_CHECK;
        for (budget, visited) in [(u64::MAX, c), (3 * c, c), (100, 100)] {
            let limits = Limits { budget, max_depth: None };
            let [looped, recursive] = both_or_aborted(&tree, &crate::Enumerate, 0, 0, limits, Some(&abort));
            assert_eq!(looped.2.visited, visited, "budget {budget}");
            assert_eq!(looped, both(&tree, &crate::Enumerate, 0, 0, Limits { budget: visited, max_depth: None })[0]);
            assert_eq!(recursive, looped);
        }
        assert!(order.len() as u64 > 2 * c);
    }

    /// A chain 0 - 1 - 2 - ... of `len` nodes, searched `MAX_RECURSION` levels deep at most.
    struct Chain<const MAX_RECURSION: u32> {
        len: u32,
    }

    impl<const M: u32> Tree for Chain<M> {
        type Node = u32;
        type Children<'a> = std::option::IntoIter<u32>;
        fn root(&self) -> u32 {
            0
        }
        fn children<'a>(&'a self, node: &u32, _depth: u32) -> Self::Children<'a> {
            (node + 1 < self.len).then_some(node + 1).into_iter()
        }
    }

    impl<const M: u32> Recursive for Chain<M> {
        const MAX_RECURSION: u32 = M;
    }

    #[test]
    fn a_job_recurses_no_deeper_than_its_limit_and_hands_back_the_rest() {
        let chain = Chain::<5> { len: 100 };
        let job = Job { start: &10, depth: 10, limits: Limits::UNLIMITED, abort: None };
        let mut back = Vec::new();
        let stats =
            search_recursive(&chain, &crate::Enumerate, job, &mut String::new(), &mut Vec::new(), &mut |n, d| {
                back.push((n, d))
            });
        assert_eq!((stats.visited, stats.max_depth, stats.leaves), (6, 15, 0));
        assert_eq!(back, vec![(16, 16)]);
        // A depth limit closer than the recursion's still counts.
        let job = Job { start: &10, depth: 10, limits: Limits { budget: u64::MAX, max_depth: Some(12) }, abort: None };
        back.clear();
        let stats =
            search_recursive(&chain, &crate::Enumerate, job, &mut String::new(), &mut Vec::new(), &mut |n, d| {
                back.push((n, d))
            });
        assert_eq!((stats.visited, back), (3, vec![(13, 13)]));
    }

    /// A spine 0 - 2 - 4 - ... of `len` nodes, each with a leaf (its id plus one) after the next
    /// spine node; searched 5 levels deep at most.
    struct Comb {
        len: u32,
    }

    impl Tree for Comb {
        type Node = u32;
        type Children<'a> = std::vec::IntoIter<u32>;
        fn root(&self) -> u32 {
            0
        }
        fn children<'a>(&'a self, node: &u32, _depth: u32) -> Self::Children<'a> {
            match node.is_multiple_of(2) && node / 2 + 1 < self.len {
                true => vec![node + 2, node + 1].into_iter(),
                false => Vec::new().into_iter(),
            }
        }
    }

    impl Recursive for Comb {
        const MAX_RECURSION: u32 = 5;
    }

    /// A job that went on above the deepest node it may recurse to would search the rest of the
    /// tree without what lies below (a branch and bound without its solutions): it ends there.
    #[test]
    fn a_job_ends_where_its_recursion_stops() {
        let comb = Comb { len: 100 };
        let job = Job { start: &0, depth: 0, limits: Limits::UNLIMITED, abort: None };
        let mut back = Vec::new();
        let stats =
            search_recursive(&comb, &crate::Enumerate, job, &mut String::new(), &mut Vec::new(), &mut |n, d| {
                back.push((n, d))
            });
        assert_eq!((stats.visited, stats.max_depth, stats.leaves), (6, 5, 0));
        assert_eq!(back, vec![(12, 6), (11, 6), (9, 5), (7, 4), (5, 3), (3, 2), (1, 1)]);
    }

    #[test]
    fn deep_chains_do_not_overflow_the_stack() {
        // A million levels with the default limit, on a test thread's stack of 2 MiB: jobs of
        // 1,025 nodes each, every node visited once.
        let chain = Chain::<{ <Explicit as Recursive>::MAX_RECURSION }> { len: 1_000_000 };
        let (mut list, mut visited, mut leaves) = (vec![(0, 0)], 0, 0);
        while let Some((node, depth)) = list.pop() {
            let job = Job { start: &node, depth, limits: Limits::UNLIMITED, abort: None };
            let mut push = |n, d| list.push((n, d));
            let stats =
                search_recursive(&chain, &crate::Enumerate, job, &mut crate::CountOnly, &mut Vec::new(), &mut push);
            visited += stats.visited;
            leaves += stats.leaves;
        }
        assert_eq!((visited, leaves), (1_000_000, 1));
    }
}
