//! The built-in trees of bts, each with its command-line options:
//! - [`Uts`]: the Unbalanced Tree Search benchmark, bit-exact with the reference implementation;
//! - [`Gw`]: critical Galton-Watson trees as in Avis & Devroye, Section 6;
//! - [`Queens`]: the backtracking tree of N-queens, whose solutions are output records.

mod gw;
mod queens;
mod uts;

pub use gw::{Gw, GwArgs, GwNode};
pub use queens::{Board, Queens, QueensArgs};
pub use uts::{Preset, Shape, Uts, UtsArgs, UtsChildren, UtsNode, UtsParams, UtsType};
