//! The backtracking tree of N-queens: the root is the empty board, a node at depth k has queens in
//! rows 0..k-1, and its children place a queen in row k in increasing column order wherever no
//! queen attacks it. Complete boards are output records: the N columns, 0-based, space-separated.

use bts_worker::Tree;
use clap::Parser;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt::{self, Write};

/// The largest board bts accepts (far beyond what can be enumerated).
pub const MAX_N: usize = 32;

/// Options of `bts run queens`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "queens",
    no_binary_name = true,
    about = "The backtracking tree of N-queens; solutions are output records"
)]
pub struct QueensArgs {
    /// Board size N.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_N as i64))]
    pub n: u32,
}

impl QueensArgs {
    pub fn build(&self) -> Queens {
        Queens::new(self.n as usize)
    }
}

/// A partial board: the columns of the queens in rows 0..len.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Board {
    len: u8,
    cols: [u8; MAX_N],
}

impl Board {
    pub fn columns(&self) -> &[u8] {
        &self.cols[..self.len as usize]
    }
}

impl fmt::Debug for Board {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Board{:?}", self.columns())
    }
}

impl Serialize for Board {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.columns())
    }
}

impl<'de> Deserialize<'de> for Board {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes: &[u8] = Deserialize::deserialize(d)?;
        if bytes.len() > MAX_N || bytes.iter().any(|&c| c as usize >= MAX_N) {
            return Err(de::Error::custom("not a queens board"));
        }
        let mut board = Board { len: bytes.len() as u8, cols: [0; MAX_N] };
        board.cols[..bytes.len()].copy_from_slice(bytes);
        Ok(board)
    }
}

/// The N-queens tree.
pub struct Queens {
    n: usize,
}

impl Queens {
    pub fn new(n: usize) -> Self {
        assert!((1..=MAX_N).contains(&n), "queens needs 1 <= n <= {MAX_N}");
        Queens { n }
    }
}

/// Free columns of the next row, taken lowest first.
pub struct QueensChildren {
    parent: Board,
    free: u64,
}

impl Iterator for QueensChildren {
    type Item = Board;

    fn next(&mut self) -> Option<Board> {
        if self.free == 0 {
            return None;
        }
        let col = self.free.trailing_zeros() as u8;
        self.free &= self.free - 1;
        let mut child = self.parent;
        child.cols[child.len as usize] = col;
        child.len += 1;
        Some(child)
    }
}

impl Tree for Queens {
    type Node = Board;
    type Children<'a> = QueensChildren;

    fn root(&self) -> Board {
        Board { len: 0, cols: [0; MAX_N] }
    }

    fn children(&self, node: &Board, _depth: u32) -> QueensChildren {
        let row = node.len as usize;
        if row >= self.n {
            return QueensChildren { parent: *node, free: 0 };
        }
        // Squares of row `row` attacked by the queen of row r: same column, and the two diagonals.
        let mut attacked = 0u64;
        for (r, &c) in node.columns().iter().enumerate() {
            let dist = (row - r) as u32;
            attacked |= 1 << c;
            attacked |= (1u64 << c) << dist;
            attacked |= (1u64 << c) >> dist;
        }
        let all = (1u64 << self.n) - 1;
        QueensChildren { parent: *node, free: !attacked & all }
    }

    fn output(&self, node: &Board, _depth: u32, out: &mut String) -> bool {
        if node.len as usize != self.n {
            return false;
        }
        for (i, c) in node.columns().iter().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            write!(out, "{c}").unwrap();
        }
        true
    }
}
