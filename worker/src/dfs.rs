//! Budgeted depth-first search: the work of one job.

use crate::Tree;
use crate::optimise::{Enumerate, Goal, Visit};
use bts_protocol::Solution;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many nodes a job visits between two looks at its [`Job::abort`] flag: off the hot path, and
/// often enough that a job of any budget is given up within moments.
pub(crate) const ABORT_CHECK: u64 = 4096;

/// The nodes a job may visit before its next look at `abort`, `remaining` of its budget left:
/// `None` when the budget is spent or `abort` says the result is of no use (see [`Job::abort`]).
/// Out of line and by value, so that the searches keep their counts where they are.
#[cold]
#[inline(never)]
pub(crate) fn next_slice(remaining: u64, abort: Option<&AtomicBool>) -> Option<u64> {
    (remaining > 0 && !abort.is_some_and(|a| a.load(Ordering::Relaxed))).then(|| remaining.min(ABORT_CHECK))
}

/// How far a job may go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Visit at most this many nodes (at least 1; `u64::MAX` means no limit).
    pub budget: u64,
    /// Visit no node deeper than this absolute depth; deeper nodes are returned unvisited.
    pub max_depth: Option<u32>,
}

impl Limits {
    pub const UNLIMITED: Limits = Limits { budget: u64::MAX, max_depth: None };
}

/// Where a search puts the output records of the nodes it visits.
pub trait Records {
    /// Takes `node`'s record, if it has one; true if it has.
    fn record<T: Tree + ?Sized>(&mut self, tree: &T, node: &T::Node, depth: u32) -> bool;
}

/// Records written one after another, each followed by `\n`.
impl Records for String {
    #[inline]
    fn record<T: Tree + ?Sized>(&mut self, tree: &T, node: &T::Node, depth: u32) -> bool {
        let start = self.len();
        let had = tree.output(node, depth, self);
        // `out` holds the job's earlier records: an output that replaced them would lose them
        // without a word (the check sees a shorter text, or no newline ending the last record).
        assert!(
            self.len() >= start && (start == 0 || self.as_bytes()[start - 1] == b'\n'),
            "Tree::output changed the text before its record: it may only append to `out`"
        );
        if !had {
            // What an output without a record wrote is not a record.
            self.truncate(start);
            return false;
        }
        check_one_line(&self.as_bytes()[start..]);
        self.push('\n');
        true
    }
}

/// A record is one line: a newline in it would make two, counted as one.
#[inline]
pub(crate) fn check_one_line(record: &[u8]) {
    assert!(!record.contains(&b'\n'), "Tree::output wrote a newline: a record is one line of text");
}

/// Records counted and not written (`--count-only`): asks [`Tree::has_output`].
pub struct CountOnly;

impl Records for CountOnly {
    #[inline]
    fn record<T: Tree + ?Sized>(&mut self, tree: &T, node: &T::Node, depth: u32) -> bool {
        tree.has_output(node, depth)
    }
}

/// What a search visited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobStats {
    pub visited: u64,
    /// Visited nodes that have no children.
    pub leaves: u64,
    /// Depth of the deepest visited node.
    pub max_depth: u32,
    /// Output records written.
    pub outputs: u64,
    /// Nodes pruned by a branch and bound (see [`search_with`]).
    pub pruned: u64,
}

/// Searches the subtree of `start` (at depth `start_depth`) depth first, visiting at most
/// `limits.budget` nodes and none deeper than `limits.max_depth`.
///
/// Visiting a node means counting it, handing its output record to `out` (a `String` keeps each
/// record followed by `\n`) and asking for its children. Every node generated but not visited is passed to
/// `returned` with its depth, in the order a sequential depth-first search would have visited
/// them: nodes beyond the depth limit as they are met, then, when the budget runs out, the
/// children of the last visited node followed by the remaining siblings on the stack from the
/// deepest level up.
///
/// `limits.budget` must be at least 1: the start node is always visited.
pub fn search<T: Tree + ?Sized>(
    tree: &T,
    start: T::Node,
    start_depth: u32,
    limits: Limits,
    out: &mut impl Records,
    returned: &mut impl FnMut(T::Node, u32),
) -> JobStats {
    let job = Job { start: &start, depth: start_depth, limits, abort: None };
    search_with(tree, &Enumerate, job, out, &mut Vec::new(), returned)
}

/// Where a search starts and how far it may go. The start node is borrowed, so that it survives a
/// panic of the oracle.
pub struct Job<'a, N> {
    pub start: &'a N,
    pub depth: u32,
    pub limits: Limits,
    /// Looked at every 4,096 visited nodes: once it is true, the search ends as if its
    /// budget were spent (the run stops, and the job hands the rest of its search back; or the
    /// run is over, or its master lost, and the result is dropped).
    pub abort: Option<&'a AtomicBool>,
}

/// As [`search`], with a [`Goal`]: a node the goal does not admit (when it is about to be visited
/// or returned) is pruned, counted in [`JobStats::pruned`] and dropped with its subtree; solutions
/// the goal finds go to `found`. The start node too may be pruned: then nothing is visited.
pub fn search_with<T: Tree + ?Sized, G: Goal<T>>(
    tree: &T,
    goal: &G,
    job: Job<'_, T::Node>,
    out: &mut impl Records,
    found: &mut Vec<Solution>,
    returned: &mut impl FnMut(T::Node, u32),
) -> JobStats {
    let Job { start, depth: start_depth, limits, abort } = job;
    // `budget` is where the search next stops: every ABORT_CHECK nodes it looks at `abort` and
    // goes on unless told to end, until `limits.budget`, which stays in memory (read at these
    // stops only: the loop keeps one count in registers). A solution that reaches the target
    // spends both at once.
    let mut limits = limits;
    let mut budget = limits.budget.clamp(1, ABORT_CHECK);
    let max_depth = limits.max_depth.unwrap_or(u32::MAX);
    let mut stats = JobStats { max_depth: start_depth, ..JobStats::default() };
    if !goal.admits(tree, start, start_depth) {
        stats.pruned = 1;
        return stats;
    }
    let mut pruned = 0;
    let skip_rest = goal.prunes_later_siblings();
    let mut next =
        |children: &mut T::Children<'_>, depth: u32| next_admitted(tree, goal, children, depth, &mut pruned, skip_rest);
    // stack[i] holds the untaken children of the node at depth start_depth + i; the top one, those
    // of the node visited last. A frame is made in its place on the stack, never moved after: a
    // frame kept in a variable between steps would be copied at every step.
    let mut stack: Vec<T::Children<'_>> = Vec::new();
    stats.visited = 1;
    match goal.visit(tree, start, start_depth, out, found) {
        Visit::Nothing => {}
        Visit::Record => stats.outputs = 1,
        Visit::Target => (budget, limits.budget) = (1, 1),
    }
    stack.push(tree.children(start, start_depth));
    loop {
        // The depth of the node whose children are on top.
        let depth = start_depth + stack.len() as u32 - 1;
        let top = stack.last_mut().expect("the stack holds the last visited node's children");
        if stats.visited == budget || depth >= max_depth {
            if stats.visited == budget
                && let Some(slice) = next_slice(limits.budget.max(1).saturating_sub(stats.visited), abort)
            {
                budget += slice;
                continue;
            }
            // Either the budget is spent or the children lie beyond the depth limit: hand the
            // children back unvisited.
            let mut any = false;
            while let Some(child) = next(top, depth + 1) {
                any = true;
                returned(child, depth + 1);
            }
            if !any {
                stats.leaves += 1;
            }
            stack.pop();
            if stats.visited == budget {
                while let Some(mut frame) = stack.pop() {
                    let child_depth = start_depth + stack.len() as u32 + 1;
                    while let Some(child) = next(&mut frame, child_depth) {
                        returned(child, child_depth);
                    }
                }
                stats.pruned = pruned;
                return stats;
            }
        } else if let Some(child) = next(top, depth + 1) {
            // Only a step down can go deeper than every node so far.
            stats.max_depth = stats.max_depth.max(depth + 1);
            stack.push(visit(tree, goal, child, depth + 1, out, found, &mut stats, (&mut budget, &mut limits)));
            continue;
        } else {
            stats.leaves += 1;
            stack.pop();
        }

        // Backtrack to the next sibling.
        loop {
            let child_depth = start_depth + stack.len() as u32;
            let Some(top) = stack.last_mut() else {
                stats.pruned = pruned;
                return stats;
            };
            if let Some(child) = next(top, child_depth) {
                stack.push(visit(tree, goal, child, child_depth, out, found, &mut stats, (&mut budget, &mut limits)));
                break;
            }
            stack.pop();
        }
    }
}

/// The next child of `children` worth searching; the others are pruned and counted in `pruned`.
/// When bounds descend (`skip_rest`), the first pruned child ends the list (the callers never ask
/// that iterator again). Inlined: a child returned through memory stalls the next load of it.
#[inline(always)]
fn next_admitted<T: Tree + ?Sized, G: Goal<T>>(
    tree: &T,
    goal: &G,
    children: &mut T::Children<'_>,
    depth: u32,
    pruned: &mut u64,
    skip_rest: bool,
) -> Option<T::Node> {
    for child in children.by_ref() {
        if goal.admits(tree, &child, depth) {
            return Some(child);
        }
        *pruned += 1;
        if skip_rest {
            return None;
        }
    }
    None
}

/// Counts `node`, hands it to the goal (which writes its record to `out`, or offers it as a
/// solution: one that reaches the target spends the `budget`) and gives its children, the node
/// moved into them.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn visit<'a, T: Tree + ?Sized, G: Goal<T>>(
    tree: &'a T,
    goal: &G,
    node: T::Node,
    depth: u32,
    out: &mut impl Records,
    found: &mut Vec<Solution>,
    stats: &mut JobStats,
    (budget, limits): (&mut u64, &mut Limits),
) -> T::Children<'a> {
    stats.visited += 1;
    let (node, visit) = goal.visit_owned(tree, node, depth, out, found);
    match visit {
        Visit::Nothing => {}
        Visit::Record => stats.outputs += 1,
        Visit::Target => (*budget, limits.budget) = (stats.visited, stats.visited),
    }
    tree.children_owned(node, depth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Explicit, random_tree};
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// 0 ─┬─ 1 ─┬─ 2 ─┬─ 3
    ///    │     │     └─ 4
    ///    │     └─ 5
    ///    ├─ 6 ─── 7 ─┬─ 8
    ///    │           └─ 9
    ///    └─ 10
    fn small() -> Explicit {
        let mut children = vec![Vec::new(); 11];
        children[0] = vec![1, 6, 10];
        children[1] = vec![2, 5];
        children[2] = vec![3, 4];
        children[6] = vec![7];
        children[7] = vec![8, 9];
        Explicit(children)
    }

    /// Runs one job and returns (visited ids in order, returned (id, depth) in order, stats).
    fn job(
        tree: &Explicit,
        start: u32,
        depth: u32,
        budget: u64,
        max_depth: Option<u32>,
    ) -> (Vec<u32>, Vec<(u32, u32)>, JobStats) {
        let mut out = String::new();
        let mut back = Vec::new();
        let stats = search(tree, start, depth, Limits { budget, max_depth }, &mut out, &mut |n, d| back.push((n, d)));
        let visited = out.lines().map(|l| l.parse().unwrap()).collect();
        (visited, back, stats)
    }

    #[test]
    fn budget_one_visits_the_start_and_returns_its_children() {
        let (visited, back, stats) = job(&small(), 0, 0, 1, None);
        assert_eq!(visited, vec![0]);
        assert_eq!(back, vec![(1, 1), (6, 1), (10, 1)]);
        assert_eq!((stats.visited, stats.leaves, stats.max_depth), (1, 0, 0));
    }

    #[test]
    fn budget_three_returns_the_frontier_in_dfs_order() {
        let (visited, back, stats) = job(&small(), 0, 0, 3, None);
        assert_eq!(visited, vec![0, 1, 2]);
        assert_eq!(back, vec![(3, 3), (4, 3), (5, 2), (6, 1), (10, 1)]);
        assert_eq!((stats.visited, stats.leaves, stats.max_depth), (3, 0, 2));
    }

    #[test]
    fn budget_ending_on_a_leaf_returns_only_siblings() {
        let (visited, back, stats) = job(&small(), 0, 0, 5, None);
        assert_eq!(visited, vec![0, 1, 2, 3, 4]);
        assert_eq!(back, vec![(5, 2), (6, 1), (10, 1)]);
        assert_eq!((stats.visited, stats.leaves, stats.max_depth), (5, 2, 3));
    }

    #[test]
    fn budget_of_the_tree_size_or_more_visits_everything() {
        for budget in [11, 12, u64::MAX] {
            let (visited, back, stats) = job(&small(), 0, 0, budget, None);
            assert_eq!(visited, (0..11).collect::<Vec<_>>());
            assert!(back.is_empty());
            assert_eq!((stats.visited, stats.leaves, stats.max_depth, stats.outputs), (11, 6, 3, 11));
        }
    }

    #[test]
    fn depth_limit_returns_deeper_nodes_unvisited() {
        let (visited, back, stats) = job(&small(), 0, 0, u64::MAX, Some(1));
        assert_eq!(visited, vec![0, 1, 6, 10]);
        assert_eq!(back, vec![(2, 2), (5, 2), (7, 2)]);
        // 10 is a leaf; 1 and 6 have children (returned), so they are not.
        assert_eq!((stats.visited, stats.leaves, stats.max_depth), (4, 1, 1));
    }

    #[test]
    fn depth_limit_and_budget_together() {
        let (visited, back, _) = job(&small(), 0, 0, 3, Some(1));
        assert_eq!(visited, vec![0, 1, 6]);
        assert_eq!(back, vec![(2, 2), (5, 2), (7, 2), (10, 1)]);
    }

    #[test]
    fn jobs_start_from_inner_nodes_at_their_depth() {
        let (visited, back, stats) = job(&small(), 7, 2, 2, None);
        assert_eq!(visited, vec![7, 8]);
        assert_eq!(back, vec![(9, 3)]);
        assert_eq!((stats.visited, stats.leaves, stats.max_depth), (2, 1, 3));
    }

    #[test]
    fn deep_chains_do_not_overflow_the_stack() {
        let n = 200_000u32;
        let children = (0..n).map(|i| if i + 1 < n { vec![i + 1] } else { vec![] }).collect();
        let tree = Explicit(children);
        let mut out = String::new();
        let stats = search(&tree, 0, 0, Limits::UNLIMITED, &mut out, &mut |_, _| panic!("nothing returned"));
        assert_eq!((stats.visited, stats.leaves, stats.max_depth), (n as u64, 1, n - 1));
    }

    fn depths(tree: &Explicit) -> Vec<u32> {
        let mut depth = vec![0; tree.0.len()];
        for v in 0..tree.0.len() {
            for &c in &tree.0[v] {
                depth[c as usize] = depth[v] + 1;
            }
        }
        depth
    }

    proptest! {
        /// However jobs are cut (budgets, depth limits) and ordered, every node is visited
        /// exactly once and the leaf and depth statistics add up to the tree's.
        #[test]
        fn every_node_is_visited_exactly_once(
            parents in proptest::collection::vec(any::<usize>(), 0..300),
            budgets in proptest::collection::vec(1u64..20, 1..10),
            limits in proptest::collection::vec(proptest::option::of(0u32..4), 1..10),
            picks in proptest::collection::vec(any::<usize>(), 1..10),
        ) {
            let tree = random_tree(&parents);
            let depth = depths(&tree);
            let mut list = VecDeque::from([(0u32, 0u32)]);
            let mut seen = vec![0u32; tree.0.len()];
            let (mut leaves, mut max_depth, mut jobs) = (0, 0, 0usize);
            while !list.is_empty() {
                let pick = picks[jobs % picks.len()] % list.len();
                let (node, d) = list.remove(pick).unwrap();
                let limit = limits[jobs % limits.len()].map(|rel| d + rel);
                let budget = budgets[jobs % budgets.len()];
                let (visited, back, stats) = job(&tree, node, d, budget, limit);
                prop_assert!(stats.visited <= budget && stats.visited >= 1);
                prop_assert_eq!(stats.visited as usize, visited.len());
                for v in visited {
                    seen[v as usize] += 1;
                    if let Some(l) = limit { prop_assert!(depth[v as usize] <= l); }
                }
                for &(n, nd) in &back {
                    prop_assert_eq!(depth[n as usize], nd);
                }
                list.extend(back);
                leaves += stats.leaves;
                max_depth = max_depth.max(stats.max_depth);
                jobs += 1;
            }
            prop_assert!(seen.iter().all(|&c| c == 1), "visit counts {:?}", seen);
            let true_leaves = tree.0.iter().filter(|c| c.is_empty()).count() as u64;
            prop_assert_eq!(leaves, true_leaves);
            prop_assert_eq!(max_depth, *depth.iter().max().unwrap());
        }

        /// With a LIFO list that pushes returned nodes in reverse, budgeted jobs visit the nodes in
        /// exactly the order of one sequential depth-first search.
        #[test]
        fn lifo_jobs_reproduce_sequential_dfs_order(
            parents in proptest::collection::vec(any::<usize>(), 0..300),
            budget in 1u64..20,
        ) {
            let tree = random_tree(&parents);
            let (sequential, _, _) = job(&tree, 0, 0, u64::MAX, None);
            let mut list = vec![(0u32, 0u32)];
            let mut order = Vec::new();
            while let Some((node, d)) = list.pop() {
                let (visited, back, _) = job(&tree, node, d, budget, None);
                order.extend(visited);
                list.extend(back.into_iter().rev());
            }
            prop_assert_eq!(order, sequential);
        }
    }
}
