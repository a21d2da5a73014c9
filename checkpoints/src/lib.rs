//! The bts checkpoint file: everything needed to carry on a run exactly where it stopped.
//!
//! A checkpoint holds the tree and its options, the run's options, the totals of the committed jobs,
//! the budget controller's state, every job not yet committed (those in the job list and the start
//! nodes of those that were out with workers) and the committed length of the output file.
//!
//! # File format (version 2: version 1 had no tree counters)
//! | bytes | content |
//! | --- | --- |
//! | 8 | magic `bts-ckpt` |
//! | 4 | format version, little endian |
//! | 8 | payload length, little endian |
//! | 4 | CRC-32 of the version, the length and the payload, little endian |
//! | n | payload: a [`Checkpoint`] in postcard |
//!
//! Files are replaced atomically ([`write`]): the previous checkpoint stays valid until the new one
//! is complete on disk. `README.md` beside this crate argues why resuming from a checkpoint, however
//! the run ended, counts every node and writes every output record exactly once.

mod file;
mod format;

pub use file::{load, write, write_atomically};
pub use format::{CURRENT_VERSION, LoadError, MAGIC, decode, encode};

use bts_master::{BudgetConfig, BudgetState, Order, Pending, Totals};
use bts_protocol::TreeSpec;
use bts_protocol::polling::SplitRule;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The run options a checkpoint carries over to `bts resume` (which may change some of them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredOptions {
    pub order: Order,
    pub budget: BudgetConfig,
    /// Output records were counted, not written.
    pub count_only: bool,
    /// The output file (absolute), or `None` for standard output.
    pub output: Option<PathBuf>,
    /// Where the run writes its checkpoints.
    pub checkpoint: Option<PathBuf>,
    /// Seconds between periodic checkpoints.
    pub checkpoint_every: Option<f64>,
    /// Local worker threads of the last segment.
    pub workers: u32,
    /// How work was shared; a checkpoint may be resumed in either mode.
    pub mode: StoredMode,
}

/// The mode of the run that wrote a checkpoint.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum StoredMode {
    #[default]
    Budget,
    Polling {
        split: SplitRule,
    },
}

/// A run's state between two segments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// When it was written, in milliseconds since the Unix epoch.
    pub written_unix_ms: u64,
    pub tree: TreeSpec,
    pub options: StoredOptions,
    /// Totals of the committed jobs of all segments so far.
    pub totals: Totals,
    pub budget: BudgetState,
    /// Wall time of all segments so far.
    pub elapsed_s: f64,
    /// Segments so far (a run never stopped is one segment).
    pub segments: u32,
    /// Bytes of the output file that hold committed records; anything beyond was written by jobs
    /// that are still in `jobs` and is cut off on resume.
    pub output_len: u64,
    /// Every job not yet committed.
    pub jobs: Vec<Pending>,
    /// The tree's own totals (`Totals::counters`, which `totals` does not serialise).
    pub counters: Vec<u64>,
}

impl Checkpoint {
    /// The committed totals, the tree's own counters included.
    pub fn committed_totals(&self) -> Totals {
        Totals { counters: self.counters.clone(), ..self.totals.clone() }
    }

    /// True when the run was complete: no job is left.
    pub fn is_complete(&self) -> bool {
        self.jobs.is_empty()
    }
}
