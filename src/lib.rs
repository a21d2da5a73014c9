//! bts — budgeted tree search: enumerate every node of a huge tree, given by its root and an
//! adjacency oracle, in parallel on the cores of one machine and on many machines.
//!
//! Implement [`Tree`] (or the paper's [`AdjacencyOracle`] form) for your tree, then either run it
//! from your program with [`Run`], or register it in a [`Registry`] and hand that to
//! [`cli::main_with`] to get the whole `bts` command line for it.
//!
//! This crate is a facade over small crates with one job each: `bts-protocol` (messages),
//! `bts-worker` (the oracle traits and the budgeted search), `bts-master` (the job list and the
//! scheduler) and `bts-trees` (the built-in trees).

pub mod cli;
mod logging;
mod monitor;
pub mod plot;
mod registry;
mod remaining;
mod remote;
mod run;
mod signals;
mod summary;

/// A saved run, for [`Run::resume`]: [`load_checkpoint`] reads one.
pub use bts_checkpoints::{Checkpoint, LoadError, load as load_checkpoint};
pub use bts_master::{Best, BudgetConfig, OptimumConfig, Order, Outcome, Output, SchedulerConfig, StopReason, Totals};
pub use bts_protocol::polling::SplitRule;
pub use bts_protocol::{JobFailure, TreeSpec};
pub use bts_worker::{
    AdjChildren, Adjacency, AdjacencyOracle, Entry, Enumerate, JobStats, Limits, Loop, Maximise, Optimise, Recursion,
    Recursive, Scope, Searcher, Tree, TreeSearcher, quiet_caught_panics, search,
};
pub use registry::{BuildError, Registry};
pub use run::{
    BrokeOff, Finished, ListenOptions, MonitorOptions, PollingStart, ProgressMode, Run, RunError, RunMode, RunOptions,
    Stopper, Unsaved,
};
pub use signals::stop_on_signals;
pub use summary::{BestSummary, BudgetSummary, Summary};

/// The built-in trees.
pub use bts_trees as trees;
