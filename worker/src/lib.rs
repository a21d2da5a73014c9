//! The worker side of bts: the oracle traits users implement ([`Tree`], [`AdjacencyOracle`]),
//! the budgeted depth-first search ([`search`]), type erasure down to jobs and reports
//! ([`Searcher`], [`JobRunner`]) and the loop a local worker thread runs ([`run_worker`]).

mod dfs;
mod engine;
pub mod estimate;
mod local;
mod optimise;
pub mod peers;
pub mod polling;
mod recursive;
pub mod remote;
mod stack;
#[cfg(test)]
mod testing;
mod tree;
mod unwind;

pub use dfs::{CountOnly, Job, JobStats, Limits, Records, search, search_with};
pub use engine::{
    CounterNames, FileFrame, JobRunner, JobSearch, Loop, MAX_JOB_ANSWER, Recursion, RunnerSettings, Searcher,
    StopFlags, TreeSearcher, digest_text, input_digest,
};
pub use local::{WorkerLoop, run_worker};
pub use optimise::{Enumerate, Goal, Maximise, Optimise, SharedIncumbent, Visit};
pub use recursive::{Entry, Recursive, Scope, search_recursive};
pub use stack::{StackWorker, TreeStack};
pub use tree::{AdjChildren, Adjacency, AdjacencyOracle, Tree};
pub use unwind::quiet_caught_panics;
