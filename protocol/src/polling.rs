//! Messages of the random-polling mode: between workers, and between workers and the coordinator.

use crate::{Incumbent, JobFailure, Returned, Solution};
use serde::{Deserialize, Serialize};

/// How a busy worker divides its stack with a thief.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SplitRule {
    /// Every other waiting node, counted from the bottom: about half of every level, so that
    /// both sides get shallow (large) and deep (small) subtrees alike.
    #[default]
    Alternate,
    /// The bottom node only: the shallowest, whose subtree is likely the largest.
    Bottom,
}

/// What a polling worker did since it last said.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub visited: u64,
    pub leaves: u64,
    pub max_depth: u32,
    pub outputs: u64,
    /// Output records, each ending in `\n`.
    pub output: Vec<u8>,
    /// Nodes waiting on the worker's stack when it said so.
    pub stack: u64,
    /// Nodes pruned by a branch and bound.
    pub pruned: u64,
    /// Solutions of a branch and bound found since the last report (see `ReportBatch`).
    pub solutions: Vec<Solution>,
}

/// Messages to a polling worker, from another worker or from the coordinator. Steal messages carry
/// the epoch of the run they belong to: after a rollback (a lost worker) the epoch grows, and
/// messages of an earlier epoch still on their way are dropped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerMsg {
    /// Worker `from` asks for work.
    Request { from: u32, epoch: u32 },
    /// Work for the worker that asked (counted as busy by its sender). `pauses` is the number of the
    /// last pause its sender went through: a paused thief tells by it whether the work was sent
    /// before the pause (it belongs to the snapshot) or after the sender resumed (it is the thief's).
    Work { nodes: Vec<Returned>, epoch: u32, pauses: u64 },
    /// The worker asked has nothing to give.
    NoWork { epoch: u32 },
    /// Pause number `number` (they count from 1): hand the stack to the coordinator and wait.
    Pause { number: u64 },
    /// Carry on in `epoch`, with these nodes.
    Resume { nodes: Vec<Returned>, epoch: u32 },
    /// Start a new run in `epoch`: selective initialisation as worker `index` of `of` from `root`.
    Start { root: Returned, index: u32, of: u32, epoch: u32 },
    /// Drop the stack and everything of earlier epochs; wait for `Resume` (a rollback).
    Reset { epoch: u32 },
    /// A better solution was found elsewhere (branch and bound).
    Incumbent(Incumbent),
    /// The run is over.
    Finish,
}

/// A worker's counts for distributed termination detection (see `bts_master::polling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub worker: u32,
    /// The worker has no node to visit (and no work reached it unseen).
    pub idle: bool,
    /// Work messages sent and received (taken from the inbox) in this epoch.
    pub sent: u64,
    pub received: u64,
    /// The coordinator's `Start` and `Resume` messages the worker has acted on: they too can give
    /// it work, and a wave counts only once every worker has acted on all of them.
    pub orders: u64,
}

/// What a polling worker tells the coordinator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PollReport {
    /// Nodes visited and output records since the last report.
    Progress { worker: u32, progress: Progress },
    /// Paused: the stack, the last progress, the work messages sent and received so far, and the
    /// pieces of work taken and their nodes since the last pause (a checkpoint counts them).
    Paused { worker: u32, stack: Vec<Returned>, progress: Progress, sent: u64, received: u64, pieces: u64, moved: u64 },
    /// Work that reached a paused worker.
    LateWork { worker: u32, nodes: Vec<Returned> },
    /// Visiting a node failed (the oracle panicked).
    Failed { worker: u32, failure: JobFailure },
    /// The worker is done: the run is over, or it was told to finish; `pieces` and `moved` since
    /// its last pause.
    Finished { worker: u32, progress: Progress, pieces: u64, moved: u64 },
    /// The worker dropped its stack after the `Reset` to `epoch`.
    ResetDone { worker: u32, epoch: u32 },
}

impl Progress {
    /// Adds `other` to this progress.
    pub fn merge(&mut self, other: Progress) {
        self.visited += other.visited;
        self.leaves += other.leaves;
        self.max_depth = self.max_depth.max(other.max_depth);
        self.outputs += other.outputs;
        self.output.extend_from_slice(&other.output);
        self.stack = other.stack;
        self.pruned += other.pruned;
        self.solutions.extend(other.solutions);
    }
}
