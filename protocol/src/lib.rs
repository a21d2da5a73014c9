//! Messages between the bts master and its workers.
//!
//! The master never sees a tree's node type: a node travels as [`NodeBytes`], the node serialised
//! with postcard by the worker side. Jobs go out in [`ToWorker::Jobs`]; finished jobs come back in a
//! [`ReportBatch`], which keeps the nodes and output records of many jobs in flat arrays so that a
//! batch costs a handful of allocations however many jobs it carries.

pub mod auth;
pub mod codec;
pub mod handshakes;
mod job;
mod message;
mod node;
pub mod polling;
pub mod runtime;
pub mod wire;

pub use job::{BatchError, Budget, Incumbent, Job, JobId, JobReport, NO_VALUE, ReportBatch, Returned, Solution};
pub use message::{FromWorker, JobFailure, ToWorker, TreeSpec, shell_word};
pub use node::NodeBytes;
pub use wire::{MasterFrame, PeerEntry, PeerFrame, Preamble, Welcome, WireMode, WorkerFrame};
