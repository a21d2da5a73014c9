//! The oracle traits through which users describe their trees.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::cell::RefCell;
use std::fmt::Debug;

/// A tree given by its root and a lazy, ordered list of children for every node.
///
/// bts visits every node exactly once, in parallel, by running budgeted depth-first searches from
/// nodes that travel between threads and machines; hence nodes serialise with serde. Children are
/// produced lazily and always in the same order: when a search runs out of budget, the children not
/// yet taken from the iterator are handed back as new jobs.
///
/// The tree value itself is shared by all worker threads of a process, so it must be `Sync`; every
/// process (master and remote workers) builds its own copy from the same options.
///
/// What bts relies on, and cannot check (breaking it gives wrong counts, not errors):
/// - The children of a node are the same, in the same order, in every thread, process and run:
///   random polling's start splits the root's children by position between workers, and a resumed
///   run takes up nodes a previous one generated.
/// - Nodes are encoded with postcard, which is not self-describing: serde attributes that depend on
///   the data (`skip_serializing_if`, `flatten`, untagged enums) and types such as
///   `serde_json::Value` do not decode. Every node must serialise: a failure stops the run with
///   an error (in random polling, which serialises a node only when a worker hands it on, the
///   run fails at once and keeps its last checkpoint).
/// - The master, its remote workers and a resumed run use the same program: a node type changed
///   between a run and its resume, or a tree of the same name that differs on a worker, is not
///   detected.
///
/// # Example
/// All subsets of `{0, .., n-1}`, each node a subset built by increasing elements:
/// ```
/// # use bts_worker as bts; // the doctest lives in the crate that `bts` re-exports
/// use bts::Tree;
///
/// struct Subsets { n: u32 }
///
/// impl Tree for Subsets {
///     type Node = Vec<u32>;
///     type Children<'a> = Box<dyn Iterator<Item = Vec<u32>> + 'a>;
///
///     fn root(&self) -> Vec<u32> { Vec::new() }
///
///     fn children<'a>(&'a self, node: &Vec<u32>, _depth: u32) -> Self::Children<'a> {
///         let start = node.last().map_or(0, |&x| x + 1);
///         let node = node.clone();
///         Box::new((start..self.n).map(move |x| {
///             let mut child = node.clone();
///             child.push(x);
///             child
///         }))
///     }
///
///     fn output(&self, node: &Vec<u32>, _depth: u32, out: &mut String) -> bool {
///         use std::fmt::Write;
///         write!(out, "{node:?}").unwrap();
///         true
///     }
/// }
/// ```
pub trait Tree: Send + Sync + 'static {
    /// A node. It must carry everything needed to generate its subtree; its depth is tracked by
    /// bts and passed to [`children`](Tree::children) and [`output`](Tree::output).
    type Node: Serialize + DeserializeOwned + Debug + Send + 'static;

    /// The children of a node, produced lazily in a fixed order.
    type Children<'a>: Iterator<Item = Self::Node>
    where
        Self: 'a;

    /// The root, at depth 0.
    fn root(&self) -> Self::Node;

    /// The children of `node`, which lies at `depth`.
    fn children<'a>(&'a self, node: &Self::Node, depth: u32) -> Self::Children<'a>;

    /// The children of `node`, which the search hands over once it has visited it. The default
    /// borrows it for [`children`](Tree::children); a tree whose children iterator keeps a copy of
    /// its parent overrides this to move the node in instead (the hot loop of a small-node branch
    /// and bound). It must produce the same children, in the same order, as `children`.
    #[inline]
    fn children_owned<'a>(&'a self, node: Self::Node, depth: u32) -> Self::Children<'a> {
        self.children(&node, depth)
    }

    /// Appends `node`'s output record to `out` and returns true, or returns false when the node has
    /// none. A record is one line of text: do not write a newline. `out` holds the job's records so
    /// far: only append to it (what an output returning false appended is dropped). A job whose
    /// output writes a newline or cuts `out` short fails, as if it had panicked; an edit of the
    /// earlier records in place cannot be seen, and they are written as edited.
    ///
    /// Called once for every visited node; records of a job are committed when the job completes.
    fn output(&self, node: &Self::Node, depth: u32, out: &mut String) -> bool {
        let _ = (node, depth, out);
        false
    }

    /// Whether `node` has an output record: what [`output`](Tree::output) would return. Runs that
    /// only count records (`--count-only`) call this instead of `output`. The default writes the
    /// record and throws it away; override it when writing a record costs more than telling that
    /// there is one.
    fn has_output(&self, node: &Self::Node, depth: u32) -> bool {
        written_and_dropped(|scratch| self.output(node, depth, scratch))
    }
}

/// The adjacency-oracle form of Avis & Devroye: `adj(v, j)` for `j < max_degree()` gives child `j`
/// of `v` or nothing, each child exactly once. This is the usual shape of reverse-search codes.
/// Wrap an oracle in [`Adjacency`] to get a [`Tree`].
pub trait AdjacencyOracle: Send + Sync + 'static {
    type Node: Clone + Serialize + DeserializeOwned + Debug + Send + 'static;

    fn root(&self) -> Self::Node;

    /// Δ: an upper bound on the number of children of any node.
    fn max_degree(&self) -> usize;

    /// Child `j` of `v` (for `j < max_degree()`), or `None`.
    fn adj(&self, v: &Self::Node, j: usize) -> Option<Self::Node>;

    /// As [`Tree::output`].
    fn output(&self, node: &Self::Node, depth: u32, out: &mut String) -> bool {
        let _ = (node, depth, out);
        false
    }

    /// As [`Tree::has_output`].
    fn has_output(&self, node: &Self::Node, depth: u32) -> bool {
        written_and_dropped(|scratch| self.output(node, depth, scratch))
    }
}

/// What `output` returns when it writes into a scratch buffer kept by the thread.
fn written_and_dropped(output: impl FnOnce(&mut String) -> bool) -> bool {
    thread_local!(static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) });
    SCRATCH.with_borrow_mut(|scratch| {
        scratch.clear();
        let had = output(scratch);
        // The rule of a record's one line holds when records are only counted, too.
        if had {
            crate::dfs::check_one_line(scratch.as_bytes());
        }
        had
    })
}

/// Turns an [`AdjacencyOracle`] into a [`Tree`]: the children of `v` are the non-empty `adj(v, j)`
/// in increasing `j`.
pub struct Adjacency<O>(pub O);

/// The children iterator of [`Adjacency`].
pub struct AdjChildren<'a, O: AdjacencyOracle> {
    oracle: &'a O,
    parent: O::Node,
    next: usize,
    degree: usize,
}

impl<O: AdjacencyOracle> Iterator for AdjChildren<'_, O> {
    type Item = O::Node;

    fn next(&mut self) -> Option<O::Node> {
        while self.next < self.degree {
            let j = self.next;
            self.next += 1;
            if let Some(child) = self.oracle.adj(&self.parent, j) {
                return Some(child);
            }
        }
        None
    }
}

impl<O: AdjacencyOracle> Tree for Adjacency<O> {
    type Node = O::Node;
    type Children<'a> = AdjChildren<'a, O>;

    fn root(&self) -> O::Node {
        self.0.root()
    }

    fn children<'a>(&'a self, node: &O::Node, depth: u32) -> AdjChildren<'a, O> {
        self.children_owned(node.clone(), depth)
    }

    fn children_owned<'a>(&'a self, node: O::Node, _depth: u32) -> AdjChildren<'a, O> {
        AdjChildren { oracle: &self.0, parent: node, next: 0, degree: self.0.max_degree() }
    }

    fn output(&self, node: &O::Node, depth: u32, out: &mut String) -> bool {
        self.0.output(node, depth, out)
    }

    fn has_output(&self, node: &O::Node, depth: u32) -> bool {
        self.0.has_output(node, depth)
    }
}
