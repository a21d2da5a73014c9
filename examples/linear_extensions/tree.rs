//! The linear extensions (topological sorts) of a partial order: a user-defined [`bts::Tree`].
//!
//! A node is a sequence of distinct elements that respects the order so far; its children append
//! one more element whose predecessors are all placed, smallest element first. The leaves at depth
//! n are the linear extensions, and each is an output record.

use bts::Tree;
use std::fmt::Write;

/// A partial order on the elements 0..n (n ≤ 64).
pub struct LinearExtensions {
    /// `preds[i]`: the elements that must come before `i`, as a bit set.
    preds: Vec<u64>,
}

impl LinearExtensions {
    /// The order given by pairs `(a, b)` meaning "a before b" (transitivity is implied).
    pub fn new(n: usize, before: &[(usize, usize)]) -> Result<Self, String> {
        if n == 0 || n > 64 {
            return Err(format!("the order needs 1 to 64 elements, not {n}"));
        }
        let mut preds = vec![0u64; n];
        for &(a, b) in before {
            if a >= n || b >= n || a == b {
                return Err(format!("bad relation {a} < {b} on {n} elements"));
            }
            preds[b] |= 1 << a;
        }
        Ok(Self { preds })
    }

    /// The product of two chains, `rows` × `cols`: (r, c) comes before (r+1, c) and (r, c+1).
    pub fn grid(rows: usize, cols: usize) -> Result<Self, String> {
        // Checked before the pairs are made: a huge grid would fill the memory first.
        let n = rows.checked_mul(cols).filter(|&n| (1..=64).contains(&n));
        let Some(n) = n else {
            return Err(format!("the order needs 1 to 64 elements, not {rows} × {cols}"));
        };
        let id = |r: usize, c: usize| r * cols + c;
        let mut before = Vec::new();
        for r in 0..rows {
            for c in 0..cols {
                if r + 1 < rows {
                    before.push((id(r, c), id(r + 1, c)));
                }
                if c + 1 < cols {
                    before.push((id(r, c), id(r, c + 1)));
                }
            }
        }
        Self::new(n, &before)
    }

    fn len(&self) -> usize {
        self.preds.len()
    }
}

/// The elements placed so far, in order.
pub type Sequence = Vec<u8>;

pub struct Extend {
    parent: Sequence,
    /// Elements that may come next, lowest first.
    candidates: u64,
}

impl Iterator for Extend {
    type Item = Sequence;

    fn next(&mut self) -> Option<Sequence> {
        if self.candidates == 0 {
            return None;
        }
        let next = self.candidates.trailing_zeros() as u8;
        self.candidates &= self.candidates - 1;
        let mut child = Vec::with_capacity(self.parent.len() + 1);
        child.extend_from_slice(&self.parent);
        child.push(next);
        Some(child)
    }
}

impl Tree for LinearExtensions {
    type Node = Sequence;
    type Children<'a> = Extend;

    fn root(&self) -> Sequence {
        Vec::new()
    }

    fn children(&self, node: &Sequence, _depth: u32) -> Extend {
        let placed = node.iter().fold(0u64, |set, &e| set | 1 << e);
        let candidates = (0..self.len())
            .filter(|&e| placed & (1 << e) == 0 && self.preds[e] & !placed == 0)
            .fold(0u64, |set, e| set | 1 << e);
        Extend { parent: node.clone(), candidates }
    }

    fn output(&self, node: &Sequence, _depth: u32, out: &mut String) -> bool {
        if node.len() != self.len() {
            return false;
        }
        for (i, e) in node.iter().enumerate() {
            write!(out, "{}{e}", if i > 0 { " " } else { "" }).unwrap();
        }
        true
    }
}
