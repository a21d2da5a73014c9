//! The bts checkpoint file: everything needed to carry on a run exactly where it stopped.
//!
//! A checkpoint holds the tree and its options, the run's options, the totals of the committed jobs,
//! the budget controller's state, every job not yet committed (those in the job list and the start
//! nodes of those that were out with workers) and the committed length of the output file.
//!
//! # File format (version 7)
//! | bytes | content |
//! | --- | --- |
//! | 8 | magic `bts-ckpt` |
//! | 4 | format version, little endian |
//! | 8 | payload length, little endian |
//! | 4 | CRC-32 of the version, the length and the payload, little endian |
//! | n | payload: a [`Checkpoint`] in postcard, then (version 2) its [`OutputSeal`] and the tree's counters, then (version 3) its [`StoredOptimum`], then (version 4) the input digest, then (version 5) the length of the best records at the end of the output (`StoredOptimum::best_len`), then (version 6) whether its segments ran in both modes (`Checkpoint::mixed_modes`), then (version 7) whether the run is a branch and bound (`StoredOptimum::optimises`), in postcard |
//!
//! Version 1 files, which have no output seal and no counters, are still read: their output file
//! is checked by its length only.
//!
//! Files are replaced atomically ([`write()`]): the previous checkpoint stays valid until the new one
//! is complete on disk. `README.md` beside this crate argues why resuming from a checkpoint, however
//! the run ended, counts every node and writes every output record exactly once.

mod file;
mod format;
mod seal;

pub use file::{load, read_bytes, temporary_path, write, write_atomically};
pub use format::{CURRENT_VERSION, LoadError, MAGIC, decode, encode, version_of};
pub use seal::{OutputSeal, OutputSum, sum_prefix};

use bts_master::{Best, BudgetConfig, BudgetState, Order, Pending, Totals};
use bts_protocol::TreeSpec;
use bts_protocol::polling::SplitRule;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The run options a checkpoint carries over to `bts resume` (which may change some of them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoredOptions {
    pub order: Order,
    pub budget: BudgetConfig,
    /// Output records were counted, not written.
    pub count_only: bool,
    /// The output file, or `None` for standard output. Relative to the checkpoint's folder when it
    /// lies in that folder or below (so that a copy of a run's folder carries on in the copy),
    /// absolute otherwise; see [`Checkpoint::output_path`].
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
    /// What the output file must hold for the run to carry on (`None` in a version-1 file). Stored
    /// after the rest of the payload, so that version 1 is this layout without it.
    #[serde(skip)]
    pub seal: Option<OutputSeal>,
    /// The tree's own totals (`Totals::counters`, which `totals` does not serialise); empty in a
    /// version-1 file. Stored after the seal.
    #[serde(skip)]
    pub counters: Vec<u64>,
    /// A branch and bound's incumbent (version 3; none in older files). Stored after the counters.
    #[serde(skip)]
    pub optimum: StoredOptimum,
    /// The digest of the file the tree was read from (`Searcher::input_digest`; version 4, none in
    /// older files): a run resumes only on the same file. Stored after the optimum.
    #[serde(skip)]
    pub input_digest: Option<u32>,
    /// Segments ran in both modes, budget and polling (version 6; false in older files), so that
    /// `totals.jobs` counts jobs and steals together. Stored after the length of the best records.
    #[serde(skip)]
    pub mixed_modes: bool,
}

/// What a checkpoint keeps of a branch and bound.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredOptimum {
    /// The best solutions committed so far (`Totals::best`).
    pub best: Option<Best>,
    /// Nodes pruned so far (`Totals::pruned`).
    pub pruned: u64,
    /// The run keeps every optimal solution (`--all-best`).
    pub keep_ties: bool,
    /// Bytes at the end of the committed output that are `best`'s records, written when the run
    /// completed or reached its target (`Totals::best_len`; version 5, stored after the input
    /// digest): a resumed run cuts them off and writes its best records when it ends.
    #[serde(skip)]
    pub best_len: u64,
    /// The run is a branch and bound (version 7, stored after the mixed modes; in older files
    /// known only when it had found a solution or pruned a node): a resumed run must be one too.
    #[serde(skip)]
    pub optimises: Option<bool>,
}

impl Checkpoint {
    /// The committed totals a resumed run starts from, the tree's own counters included. A branch
    /// and bound's best records, which the run wrote when it ended, are taken back
    /// ([`Totals::resumed`]): the resumed run writes its own when it ends (the output file is cut
    /// back to [`resumed_output_len`]).
    ///
    /// [`resumed_output_len`]: Checkpoint::resumed_output_len
    pub fn committed_totals(&self) -> Totals {
        let totals = Totals {
            counters: self.counters.clone(),
            best: self.optimum.best.clone(),
            pruned: self.optimum.pruned,
            best_len: self.optimum.best_len,
            ..self.totals.clone()
        };
        totals.resumed()
    }

    /// The bytes of the output file a resumed run carries on from: the committed output but the
    /// best records written at the end of the run.
    pub fn resumed_output_len(&self) -> u64 {
        self.output_len.saturating_sub(self.optimum.best_len)
    }

    /// The best records the committed output ends with, as the run wrote them (`best_len` bytes;
    /// none before the run ended).
    pub fn written_best(&self) -> Vec<u8> {
        if self.optimum.best_len == 0 {
            return Vec::new();
        }
        let records = self.optimum.best.iter().flat_map(|b| &b.records);
        records.flat_map(|r| r.iter().copied().chain([b'\n'])).collect()
    }

    /// True when the run was complete: no job is left.
    pub fn is_complete(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The output file of the run, `None` for standard output: a relative stored path is taken
    /// relative to the folder of `checkpoint_path`, the place this checkpoint was loaded from.
    pub fn output_path(&self, checkpoint_path: &Path) -> Option<PathBuf> {
        let output = self.options.output.as_ref()?;
        Some(match checkpoint_path.parent() {
            Some(folder) if output.is_relative() => folder.join(output),
            _ => output.clone(),
        })
    }
}

/// The longest time, in seconds, that a run's options or a checkpoint may hold (about 31 years):
/// anything longer cannot be added to a clock. The command line takes the same bound, so that
/// whatever a run stores can be loaded again.
pub const MAX_SECONDS: f64 = 1e9;

/// True when `seconds` is a time this bts can use: finite, not negative, at most [`MAX_SECONDS`].
pub fn usable_seconds(seconds: f64) -> bool {
    (0.0..=MAX_SECONDS).contains(&seconds)
}
