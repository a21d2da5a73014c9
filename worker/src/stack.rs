//! The depth-first stack of a random-polling worker: nodes waiting to be visited, with the
//! shallowest at the bottom, which a busy worker splits to give part of it to an idle one.

use crate::engine::debug_text;
use crate::optimise::{Enumerate, Goal, Unpruned};
use crate::{CountOnly, Job, Limits, Tree, search_with, unwind};
use bts_protocol::polling::{Progress, SplitRule};
use bts_protocol::{Incumbent, JobFailure, JobId, NodeBytes, Returned};
use std::sync::Arc;

/// A depth-first stack that can be split, behind a type-erased interface.
pub trait StackWorker: Send {
    /// Adds nodes to visit.
    fn push(&mut self, nodes: Vec<Returned>) -> Result<(), String>;

    /// Visits up to `max` nodes; returns how many it visited (fewer when the stack runs dry).
    fn work(&mut self, max: u64) -> Result<u64, JobFailure>;

    /// Visits the top node and puts all its children on the stack, pruning none of them: every
    /// worker of a selective start must see the same nodes, whatever incumbent it knows.
    fn expand_top(&mut self) -> Result<(), JobFailure>;

    fn len(&self) -> usize;

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes part of the stack for a thief (nothing when fewer than two nodes wait: the top one is
    /// next to be visited).
    fn split(&mut self, rule: SplitRule) -> Vec<Returned>;

    /// Takes the whole stack (for a checkpoint).
    fn take_all(&mut self) -> Vec<Returned>;

    /// What was done since the last call.
    fn take_progress(&mut self) -> Progress;

    /// A better solution was found elsewhere (branch and bound; plain trees ignore it).
    fn raise(&mut self, incumbent: Incumbent) {
        let _ = incumbent;
    }

    /// A branch and bound's incumbent, as this process knows it, reaches the run's target: the
    /// run is about to stop, and searching on is wasted.
    fn target_reached(&self) -> bool {
        false
    }
}

/// The [`StackWorker`] of a [`Tree`]; a branch and bound prunes a node when it comes off the stack.
pub struct TreeStack<T: Tree, G = Enumerate> {
    tree: Arc<T>,
    goal: Arc<G>,
    /// Nodes to visit and their depths; the next one on top.
    stack: Vec<(T::Node, u32)>,
    keep_output: bool,
    out: String,
    progress: Progress,
}

impl<T: Tree> TreeStack<T> {
    pub fn new(tree: Arc<T>, keep_output: bool) -> Self {
        Self::with_goal(tree, Arc::new(Enumerate), keep_output)
    }
}

impl<T: Tree, G: Goal<T>> TreeStack<T, G> {
    pub fn with_goal(tree: Arc<T>, goal: Arc<G>, keep_output: bool) -> Self {
        Self { tree, goal, stack: Vec::new(), keep_output, out: String::new(), progress: Progress::default() }
    }

    /// Visits up to `max` nodes with `goal`; see [`StackWorker::work`].
    fn work_with(&mut self, max: u64, goal: &impl Goal<T>) -> Result<u64, JobFailure> {
        let tree = &*self.tree;
        let keep_output = self.keep_output;
        let (stack, out, p) = (&mut self.stack, &mut self.out, &mut self.progress);
        let mut visited = 0;
        // The node whose subtree is searched and where the stack stood before it: a panic of the
        // oracle puts it back as it was, and drops the subtree's records.
        let mut current = None;
        let mut stack_before = 0;
        let result = unwind::catch(|| {
            // A subtree that reached the target ends at once (search_with); so does the slice.
            while visited < max && !goal.incumbent().is_some_and(|i| i.target_reached()) {
                let Some(top) = stack.pop() else { break };
                let (node, depth) = &*current.insert(top);
                stack_before = stack.len();
                // A lazy search of the node's subtree, as in budget mode (children are made only
                // when needed); what it leaves goes on the stack, its first node on top.
                let limits = Limits { budget: max - visited, max_depth: None };
                let job = Job { start: node, depth: *depth, limits, abort: None };
                let found = &mut p.solutions;
                let mut push = |node, depth| stack.push((node, depth));
                let stats = if keep_output {
                    search_with(tree, goal, job, out, found, &mut push)
                } else {
                    search_with(tree, goal, job, &mut CountOnly, found, &mut push)
                };
                stack[stack_before..].reverse();
                // The subtree's records are kept as it ends: `out` holds no others, so an output
                // that wrongly rewrites it cannot reach the records of an earlier subtree.
                p.output.extend_from_slice(out.as_bytes());
                out.clear();
                current = None;
                visited += stats.visited;
                p.visited += stats.visited;
                p.leaves += stats.leaves;
                p.outputs += stats.outputs;
                p.pruned += stats.pruned;
                p.max_depth = p.max_depth.max(stats.max_depth);
            }
        });
        if let Err(panic) = result {
            // The subtree was not searched: its root goes back on the stack, for a checkpoint to
            // keep, and what the search did is undone.
            let (node, depth) = current.expect("a panic happens while a subtree is searched");
            self.stack.truncate(stack_before);
            self.out.clear();
            let failure = JobFailure::new(JobId(0), debug_text(&node), format!("the tree oracle panicked: {panic}"));
            self.stack.push((node, depth));
            return Err(failure);
        }
        Ok(visited)
    }

    fn encode(&self, node: &T::Node, depth: u32) -> Returned {
        // A node that does not serialise cannot be handed on; the worker's thread dies, and the
        // run with it (nodes are not serialised as they are generated: that would cost every node).
        let node = postcard::to_extend(node, NodeBytes::new())
            .unwrap_or_else(|e| panic!("cannot serialise node {node:?}: {e}"));
        Returned { depth, node }
    }
}

impl<T: Tree, G: Goal<T>> StackWorker for TreeStack<T, G> {
    fn push(&mut self, nodes: Vec<Returned>) -> Result<(), String> {
        // Given in depth-first order: the first is to be visited first, so it goes on top.
        for r in nodes.into_iter().rev() {
            let node: T::Node =
                postcard::from_bytes(r.node.as_slice()).map_err(|e| format!("cannot decode a node: {e}"))?;
            self.stack.push((node, r.depth));
        }
        Ok(())
    }

    fn work(&mut self, max: u64) -> Result<u64, JobFailure> {
        let goal = Arc::clone(&self.goal);
        self.work_with(max, &*goal)
    }

    fn expand_top(&mut self) -> Result<(), JobFailure> {
        let unpruned = Unpruned(Arc::clone(&self.goal));
        self.work_with(1, &unpruned).map(drop)
    }

    fn len(&self) -> usize {
        self.stack.len()
    }

    fn split(&mut self, rule: SplitRule) -> Vec<Returned> {
        let n = self.stack.len();
        if n < 2 {
            return Vec::new();
        }
        let given: Vec<(T::Node, u32)> = match rule {
            SplitRule::Bottom => vec![self.stack.remove(0)],
            SplitRule::Alternate => {
                // Positions 0, 2, 4, ... below the top go; the others stay, in order.
                let top = self.stack.pop().expect("two nodes at least");
                let mut keep = Vec::with_capacity(n / 2 + 1);
                let mut give = Vec::with_capacity(n / 2);
                for (i, item) in self.stack.drain(..).enumerate() {
                    if i % 2 == 0 { give.push(item) } else { keep.push(item) }
                }
                keep.push(top);
                self.stack = keep;
                give
            }
        };
        // The thief gets them in depth-first order (its next node first): the reverse of the stack.
        given.iter().rev().map(|(node, depth)| self.encode(node, *depth)).collect()
    }

    fn take_all(&mut self) -> Vec<Returned> {
        let all = std::mem::take(&mut self.stack);
        all.iter().rev().map(|(node, depth)| self.encode(node, *depth)).collect()
    }

    fn take_progress(&mut self) -> Progress {
        let mut p = std::mem::take(&mut self.progress);
        p.stack = self.stack.len() as u64;
        p
    }

    fn raise(&mut self, incumbent: Incumbent) {
        if let Some(shared) = self.goal.incumbent() {
            shared.raise(incumbent);
        }
    }

    fn target_reached(&self) -> bool {
        self.goal.incumbent().is_some_and(|i| i.target_reached())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Explicit, random_tree};
    use proptest::prelude::*;

    fn root() -> Vec<Returned> {
        vec![Returned { depth: 0, node: postcard::to_extend(&0u32, NodeBytes::new()).unwrap() }]
    }

    proptest! {
        /// Stacks split at random moments among several workers, by either rule, visit every node
        /// exactly once.
        #[test]
        fn splitting_loses_and_repeats_nothing(
            parents in proptest::collection::vec(any::<usize>(), 0..400),
            steps in proptest::collection::vec((0usize..4, 1u64..8, any::<bool>(), 0usize..4), 1..200),
        ) {
            let tree = Arc::new(random_tree(&parents));
            let mut workers: Vec<TreeStack<Explicit>> = (0..4).map(|_| TreeStack::new(Arc::clone(&tree), true)).collect();
            workers[0].push(root()).unwrap();
            for (w, n, bottom, thief) in steps {
                workers[w].work(n).unwrap();
                let rule = if bottom { SplitRule::Bottom } else { SplitRule::Alternate };
                let loot = workers[w].split(rule);
                workers[thief].push(loot).unwrap();
            }
            for w in &mut workers {
                w.work(u64::MAX).unwrap();
            }
            let mut seen = vec![0; tree.0.len()];
            let mut visited = 0;
            for w in &mut workers {
                let p = w.take_progress();
                visited += p.visited;
                for line in String::from_utf8(p.output).unwrap().lines() {
                    seen[line.parse::<usize>().unwrap()] += 1;
                }
            }
            prop_assert_eq!(visited as usize, tree.0.len());
            prop_assert!(seen.iter().all(|&c| c == 1));
        }
    }

    /// The tree of [`Explicit`], whose `output` of one node wrongly clears `out`.
    struct Clearing(Explicit, u32);

    impl Tree for Clearing {
        type Node = u32;
        type Children<'a> = <Explicit as Tree>::Children<'a>;
        fn root(&self) -> u32 {
            0
        }
        fn children<'a>(&'a self, node: &u32, depth: u32) -> Self::Children<'a> {
            self.0.children(node, depth)
        }
        fn output(&self, node: &u32, depth: u32, out: &mut String) -> bool {
            if *node == self.1 {
                out.clear();
            }
            self.0.output(node, depth, out)
        }
    }

    #[test]
    fn a_failed_subtree_leaves_the_records_of_earlier_ones_whole() {
        // Root 0 with children 1 and 2; the output of node 3, below 2, clears what was written.
        let mut c = vec![Vec::new(); 4];
        (c[0], c[2]) = (vec![1, 2], vec![3]);
        let mut w = TreeStack::new(Arc::new(Clearing(Explicit(c), 3)), true);
        w.push(root()).unwrap();
        w.work(1).unwrap(); // visits 0; the stack (bottom to top) is 2 1
        let failure = w.work(u64::MAX).unwrap_err();
        assert!(failure.message.contains("only append"), "{}", failure.message);
        // Node 1's subtree was searched; node 2's goes back whole, none of its records kept.
        assert_eq!(String::from_utf8(w.take_progress().output).unwrap(), "0\n1\n");
        let kept: Vec<u32> = w.take_all().iter().map(|r| postcard::from_bytes(r.node.as_slice()).unwrap()).collect();
        assert_eq!(kept, vec![2]);
    }

    #[test]
    fn alternate_gives_half_of_each_level_and_keeps_the_next_node() {
        // Root 0 with children 1..=4, node 1 with children 5..=7.
        let mut c = vec![Vec::new(); 8];
        c[0] = vec![1, 2, 3, 4];
        c[1] = vec![5, 6, 7];
        let mut w = TreeStack::new(Arc::new(Explicit(c)), false);
        w.push(root()).unwrap();
        w.work(2).unwrap(); // visits 0 and 1; the stack (bottom to top) is 4 3 2 7 6 5
        let given: Vec<u32> =
            w.split(SplitRule::Alternate).iter().map(|r| postcard::from_bytes(r.node.as_slice()).unwrap()).collect();
        // Positions 0, 2, 4 below the top (4, 2, 6) go, in depth-first order for the thief.
        assert_eq!(given, vec![6, 2, 4]);
        let kept: Vec<u32> = w.take_all().iter().map(|r| postcard::from_bytes(r.node.as_slice()).unwrap()).collect();
        assert_eq!(kept, vec![5, 7, 3]);
    }
}
