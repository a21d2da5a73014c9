//! The built-in trees of bts, each with its command-line options:
//! - [`Uts`]: the Unbalanced Tree Search benchmark, bit-exact with the reference implementation;
//! - [`Gw`]: critical Galton-Watson trees as in Avis & Devroye, Section 6;
//! - [`Queens`]: the backtracking tree of N-queens, whose solutions are output records;
//! - [`Knapsack`] and [`MaxClique`]: branch and bound for 0/1 knapsack and maximum clique.

mod gw;
mod knapsack;
mod maxclique;
mod queens;
mod uts;

pub use gw::{Gw, GwArgs, GwNode};
pub use knapsack::{
    Knapsack, KnapsackArgs, KnapsackOf, Packing, PackingChildren, Taken, Wide, WideKnapsack, knapsack_searcher,
};
pub use maxclique::{Clique, CliqueChildren, MaxClique, MaxCliqueArgs};
pub use queens::{Board, Queens, QueensArgs};
pub use uts::{Preset, Shape, Uts, UtsArgs, UtsChildren, UtsNode, UtsParams, UtsType};
