//! The backtracking tree of N-queens: the root is the empty board, a node at depth k has queens in
//! rows 0..k-1, and its children place a queen in row k in increasing column order wherever no
//! queen attacks it. Complete boards are output records: the N columns, 0-based, space-separated.

use bts_worker::Tree;
use clap::Parser;
use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt::{self, Write};

/// The largest board bts accepts (far beyond what can be enumerated: the count of 27 took a year
/// of a large cluster).
pub const MAX_N: usize = 25;

/// Bits of a column number in [`Board::placed`].
const COL_BITS: u32 = 5;

/// Options of `bts run queens`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "queens",
    no_binary_name = true,
    // A negative number is a bad value, not an unknown option.
    allow_negative_numbers = true,
    about = "The backtracking tree of N-queens; solutions are output records"
)]
pub struct QueensArgs {
    /// Board size N (1 to 25).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=MAX_N as i64))]
    pub n: u32,
}

impl QueensArgs {
    pub fn build(&self) -> Queens {
        Queens::new(self.n as usize)
    }
}

/// A partial board: the columns of the queens in rows 0..len, and the squares of the next row they
/// attack, as bitboards (so that a node's children cost a few instructions, not a pass over its
/// queens). Only the columns travel: the bitboards are derived from them. Every field is a whole
/// word, written at once: a board is copied right after it is made, and a copy that reads a word
/// written a byte at a time waits for the bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Board {
    len: u32,
    /// Columns taken.
    cols: u32,
    /// Squares of the next row on a diagonal of a queen, going left and right.
    left: u32,
    right: u32,
    /// The columns of rows 0..len, the last row's in the lowest bits (so that placing a queen
    /// shifts by a constant).
    placed: u128,
}

impl Board {
    const EMPTY: Board = Board { len: 0, cols: 0, left: 0, right: 0, placed: 0 };

    pub fn columns(&self) -> impl ExactSizeIterator<Item = u8> + '_ {
        (0..self.len).map(|i| ((self.placed >> (COL_BITS * (self.len - 1 - i))) & 0x1f) as u8)
    }

    /// The free squares of the next row.
    fn free(&self, all: u32) -> u32 {
        !(self.cols | self.left | self.right) & all
    }

    /// This board with a queen in the next row, column `col` (a free one).
    #[inline]
    fn place(&self, col: u32) -> Board {
        let bit = 1u32 << col;
        Board {
            len: self.len + 1,
            cols: self.cols | bit,
            left: (self.left | bit) << 1,
            right: (self.right | bit) >> 1,
            placed: (self.placed << COL_BITS) | u128::from(col),
        }
    }
}

impl fmt::Debug for Board {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Board{:?}", self.columns().collect::<Vec<_>>())
    }
}

impl Serialize for Board {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(&self.columns().collect::<Vec<_>>())
    }
}

impl<'de> Deserialize<'de> for Board {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let bytes: &[u8] = Deserialize::deserialize(d)?;
        if bytes.len() > MAX_N || bytes.iter().any(|&c| c as usize >= MAX_N) {
            return Err(de::Error::custom("not a queens board"));
        }
        let mut board = Board::EMPTY;
        for &c in bytes {
            if board.free(u32::MAX) & (1 << c) == 0 {
                return Err(de::Error::custom("not a queens board: two queens attack each other"));
            }
            board = board.place(u32::from(c));
        }
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

    /// The squares of a row.
    fn all(&self) -> u32 {
        (((1u64) << self.n) - 1) as u32
    }
}

/// Free columns of the next row, taken lowest first.
pub struct QueensChildren {
    parent: Board,
    free: u32,
}

impl Iterator for QueensChildren {
    type Item = Board;

    #[inline]
    fn next(&mut self) -> Option<Board> {
        if self.free == 0 {
            return None;
        }
        let col = self.free.trailing_zeros();
        self.free &= self.free - 1;
        Some(self.parent.place(col))
    }
}

impl Tree for Queens {
    type Node = Board;
    type Children<'a> = QueensChildren;

    fn root(&self) -> Board {
        Board::EMPTY
    }

    #[inline]
    fn children(&self, node: &Board, _depth: u32) -> QueensChildren {
        let free = if (node.len as usize) < self.n { node.free(self.all()) } else { 0 };
        QueensChildren { parent: *node, free }
    }

    #[inline]
    fn output(&self, node: &Board, depth: u32, out: &mut String) -> bool {
        if !self.has_output(node, depth) {
            return false;
        }
        for (i, c) in node.columns().enumerate() {
            if i > 0 {
                out.push(' ');
            }
            write!(out, "{c}").unwrap();
        }
        true
    }

    #[inline]
    fn has_output(&self, node: &Board, _depth: u32) -> bool {
        node.len as usize == self.n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A board travels as its columns; the bitboards are rebuilt on arrival, and a board whose
    /// queens attack each other is refused.
    #[test]
    fn boards_travel_as_columns_and_are_checked_on_arrival() {
        let queens = Queens::new(8);
        let mut board = queens.root();
        for _ in 0..5 {
            board = queens.children(&board, 0).last().unwrap();
        }
        let bytes = postcard::to_allocvec(&board).unwrap();
        assert_eq!(bytes[1..], board.columns().collect::<Vec<_>>());
        let back: Board = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back, board);
        let children = |b: &Board| queens.children(b, 0).map(|c| c.columns().collect()).collect::<Vec<Vec<u8>>>();
        assert_eq!(children(&back), children(&board));
        for attacking in [&[0u8, 0][..], &[0, 1], &[3, 1, 5, 2]] {
            let bytes = postcard::to_allocvec(&serde_bytes_like(attacking)).unwrap();
            assert!(postcard::from_bytes::<Board>(&bytes).is_err(), "{attacking:?} accepted");
        }
    }

    /// The serialised form of a board with these columns.
    fn serde_bytes_like(columns: &[u8]) -> Board {
        let placed = columns.iter().fold(0u128, |p, &c| (p << COL_BITS) | u128::from(c));
        Board { len: columns.len() as u32, placed, ..Board::EMPTY }
    }
}
