//! Trees for the crate's unit tests.

use crate::Tree;

/// A tree given by explicit child lists: node ids are indices, the root is 0, and every node is an
/// output record (its id).
pub struct Explicit(pub Vec<Vec<u32>>);

impl Tree for Explicit {
    type Node = u32;
    type Children<'a> = std::iter::Copied<std::slice::Iter<'a, u32>>;
    fn root(&self) -> u32 {
        0
    }
    fn children<'a>(&'a self, node: &u32, _depth: u32) -> Self::Children<'a> {
        self.0[*node as usize].iter().copied()
    }
    fn output(&self, node: &u32, _depth: u32, out: &mut String) -> bool {
        out.push_str(&node.to_string());
        true
    }
}

/// A random tree: node i > 0 hangs below an earlier node (`parents[i - 1] % i`); children in id order.
pub fn random_tree(parents: &[usize]) -> Explicit {
    let mut children = vec![Vec::new(); parents.len() + 1];
    for (i, &p) in parents.iter().enumerate() {
        children[p % (i + 1)].push(i as u32 + 1);
    }
    Explicit(children)
}

/// The plain recursion over the child lists.
impl crate::Recursive for Explicit {}
