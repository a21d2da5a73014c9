//! The TCP conversation between the master and a remote worker process.
//!
//! Each side first sends a 12-byte [`Preamble`] (magic and protocol version), so that a stranger or a
//! different version is recognised before anything else is read. Then each side sends frames
//! (see [`crate::codec`]): the worker [`WorkerFrame`]s, the master [`MasterFrame`]s.
//!
//! The handshake, in order:
//! 1. worker: `Hello` (its threads and a fresh nonce);
//! 2. master: `Challenge` (a fresh nonce, and proof that it knows the token: an HMAC over both nonces);
//! 3. worker: `Auth` (its own HMAC over both nonces);
//! 4. master: `Welcome` (the tree to build and the run's settings), or `Refused` with the reason.
//!
//! The token itself never crosses the wire. After `Welcome`, messages flow as `Message` frames tagged
//! with the worker thread they concern; the master sends `Ping` every heartbeat and the worker answers
//! `Pong`, so each side notices a silent peer.

use crate::polling::{Counts, PeerMsg, PollReport, SplitRule};
use crate::{FromWorker, ToWorker, TreeSpec};
use serde::{Deserialize, Serialize};

pub const MAGIC: [u8; 8] = *b"bts-wire";
/// Version 4 added the input digest to `Welcome` and `WorkerFrame::Leaving`; version 5
/// `WorkerFrame::Leave`; version 6 `ToWorker::Stopping`; version 7 `JobFailure::given_up`; version
/// 8 `ToWorker::Barred`; version 9 `Incumbent::target`.
pub const PROTOCOL_VERSION: u32 = 10;
pub const PREAMBLE_LEN: usize = 12;

/// Magic and version, sent first by both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preamble {
    pub version: u32,
}

impl Preamble {
    pub const CURRENT: Preamble = Preamble { version: PROTOCOL_VERSION };

    pub fn to_bytes(self) -> [u8; PREAMBLE_LEN] {
        let mut b = [0u8; PREAMBLE_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[8..].copy_from_slice(&self.version.to_le_bytes());
        b
    }

    /// `None` when the bytes do not start with the magic: the peer does not speak bts.
    pub fn parse(bytes: &[u8; PREAMBLE_LEN]) -> Option<Preamble> {
        (bytes[..8] == MAGIC).then(|| Preamble { version: u32::from_le_bytes(bytes[8..].try_into().expect("4 bytes")) })
    }
}

pub type Nonce = [u8; 32];
pub type Tag = [u8; 32];

/// What a worker process sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkerFrame {
    /// `peer_address`: where other workers reach this process's workers (random polling).
    Hello {
        threads: u32,
        nonce: Nonce,
        peer_address: Option<String>,
    },
    Auth {
        tag: Tag,
    },
    Message {
        thread: u32,
        message: FromWorker,
    },
    Pong {
        seq: u64,
    },
    /// A report of one of this process's polling workers.
    Report(PollReport),
    /// The counts of this process's polling workers, for termination wave `wave`.
    Counts {
        wave: u64,
        counts: Vec<Counts>,
    },
    /// The worker cannot take part after all (it cannot build the tree, or its input file differs
    /// from the master's): why, for the master's log. Nothing follows.
    Leaving {
        reason: String,
    },
    /// The process was told to stop (a signal). A polling process asks the coordinator to take its
    /// workers' nodes and let it go (see `bts_master::polling`); a budget-mode process sends it
    /// after the reports of the jobs it was running, and nothing follows (the master gives the
    /// jobs queued for it to others).
    Leave,
}

/// Run settings a worker needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub tree: TreeSpec,
    /// Send output records (false with `--count-only`).
    pub keep_output: bool,
    /// The master pings this often; a worker that hears nothing for `silence_ms` gives up on it.
    pub heartbeat_ms: u64,
    pub silence_ms: u64,
    /// How work is shared.
    pub mode: WireMode,
    /// The digest of the input file the master read the tree from, if it reads one: a worker whose
    /// copy differs refuses to work (`Searcher::input_digest`).
    pub input_digest: Option<u32>,
}

/// The mode of a run, as a remote worker needs to know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WireMode {
    Budget,
    Polling { split: SplitRule },
}

/// Where the polling workers numbered `first..first + count` are reached.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerEntry {
    pub first: u32,
    pub count: u32,
    pub address: String,
}

/// What the master sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MasterFrame {
    Challenge {
        nonce: Nonce,
        tag: Tag,
    },
    Welcome(Welcome),
    Refused {
        reason: String,
    },
    Message {
        thread: u32,
        message: ToWorker,
    },
    Ping {
        seq: u64,
    },
    /// Random polling: this process's threads are workers `first..first + threads`.
    Assigned {
        first: u32,
    },
    /// Random polling: every process's workers and where to reach them (sent again on changes).
    Peers(Vec<PeerEntry>),
    /// Random polling: a message from the coordinator for one of this process's workers.
    Peer {
        worker: u32,
        message: PeerMsg,
    },
    /// Random polling: report the workers' counts for termination wave `wave`.
    Probe {
        wave: u64,
    },
}

/// What polling workers of different processes send each other on a peer connection, after a
/// handshake like the master's (the side that connects proves the token as a worker does).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PeerFrame {
    Hello {
        nonce: Nonce,
    },
    Challenge {
        nonce: Nonce,
        tag: Tag,
    },
    Auth {
        tag: Tag,
    },
    /// A message for worker `to`.
    Deliver {
        to: u32,
        message: PeerMsg,
    },
    /// The dialling process runs these workers and serves peers there (sent after the handshake).
    Introduce(PeerEntry),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preamble_round_trips_and_rejects_strangers() {
        let bytes = Preamble::CURRENT.to_bytes();
        assert_eq!(Preamble::parse(&bytes), Some(Preamble::CURRENT));
        assert_eq!(Preamble::parse(b"GET / HTTP/1"), None);
        let mut other = bytes;
        other[8] = 7;
        assert_eq!(Preamble::parse(&other), Some(Preamble { version: 7 }));
    }
}
