//! The coordinator of a random-polling run, as a state machine without I/O (like the scheduler of
//! budget mode): it commits what workers report, pauses them for checkpoints and stops, and knows
//! when the run is over. Drivers deliver its messages (`poll_send`) and write its committed output.
//!
//! # Why every node is counted exactly once
//! A worker reports a node as visited once it has visited it, with its output record, in the order
//! it visits them; a node is on exactly one stack or in one work message at a time (see
//! `bts_worker::polling`). A snapshot is taken only when every worker has paused, handing over its
//! stack, and every work message sent has arrived (sent and received counts agree): the
//! snapshot then holds every node not yet reported, and the totals every node reported.

use crate::scheduler::{Outcome, StopReason, Totals};
use crate::view::RunView;
use crate::{BudgetController, Order, Pending};
use bts_protocol::JobFailure;
use bts_protocol::Returned;
use bts_protocol::polling::{PeerMsg, PollReport, Progress};
use std::collections::VecDeque;

/// Why the workers are paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PauseFor {
    /// A checkpoint; then the run carries on.
    Checkpoint,
    /// The run stops.
    Stop(StopReason),
    /// A node failed; the run stops.
    Fail(JobFailure),
}

#[derive(Debug)]
enum State {
    Running,
    Paused { stack: Vec<Returned>, sent: u64, received: u64 },
    Finished,
}

#[derive(Debug)]
struct Slot {
    state: State,
    /// Work that reached the worker while it was paused.
    late: Vec<Returned>,
    late_messages: u64,
    /// Nodes on its stack when it last said.
    stack: u64,
}

pub struct Coordinator {
    totals: Totals,
    /// Nodes committed before this segment of the run.
    nodes_before: u64,
    node_limit: Option<u64>,
    slots: Vec<Slot>,
    pause: Option<PauseFor>,
    /// The pause is complete and its snapshot taken.
    snapshot: Option<Vec<Pending>>,
    /// The run ends like this once every worker has finished.
    ending: Option<Outcome>,
    outcome: Option<Outcome>,
    output: Vec<u8>,
    outbox: VecDeque<(u32, PeerMsg)>,
    peak: usize,
}

impl Coordinator {
    /// A run of `workers` polling workers, carrying on from `totals`.
    pub fn new(workers: u32, totals: Totals, node_limit: Option<u64>) -> Self {
        let slot = || Slot { state: State::Running, late: Vec::new(), late_messages: 0, stack: 0 };
        Self {
            nodes_before: totals.nodes,
            totals,
            node_limit,
            slots: (0..workers).map(|_| slot()).collect(),
            pause: None,
            snapshot: None,
            ending: None,
            outcome: None,
            output: Vec::new(),
            outbox: VecDeque::new(),
            peak: 0,
        }
    }

    pub fn handle(&mut self, report: PollReport) {
        match report {
            PollReport::Progress { worker, progress } => {
                if let Some(slot) = self.slots.get_mut(worker as usize) {
                    slot.stack = progress.stack;
                }
                self.commit(progress);
                self.check_node_limit();
            }
            PollReport::Paused { worker, stack, progress, sent, received } => {
                self.commit(progress);
                if let Some(slot) = self.slots.get_mut(worker as usize) {
                    slot.stack = stack.len() as u64;
                    slot.state = State::Paused { stack, sent, received };
                }
            }
            PollReport::LateWork { worker, nodes } => {
                if let Some(slot) = self.slots.get_mut(worker as usize) {
                    slot.late_messages += 1;
                    slot.late.extend(nodes);
                }
            }
            PollReport::Failed { worker, failure } => {
                tracing::error!(worker, node = %failure.node, "a node failed: {}", failure.message);
                self.request_pause(PauseFor::Fail(failure));
            }
            PollReport::Finished { worker, progress, pieces, moved } => {
                self.commit(progress);
                self.totals.jobs += pieces;
                self.totals.returned += moved;
                if let Some(slot) = self.slots.get_mut(worker as usize) {
                    slot.state = State::Finished;
                    slot.stack = 0;
                }
                if self.slots.iter().all(|s| matches!(s.state, State::Finished)) {
                    self.outcome = Some(self.ending.clone().unwrap_or(Outcome::Complete));
                }
            }
        }
        self.peak = self.peak.max(self.queued_nodes());
    }

    fn commit(&mut self, p: Progress) {
        let t = &mut self.totals;
        t.nodes += p.visited;
        t.leaves = t.leaves.map(|l| l + p.leaves);
        t.max_depth = t.max_depth.map(|d| d.max(p.max_depth));
        t.outputs += p.outputs;
        t.output_bytes += p.output.len() as u64;
        self.output.extend_from_slice(&p.output);
    }

    fn check_node_limit(&mut self) {
        if let Some(limit) = self.node_limit
            && self.totals.nodes - self.nodes_before >= limit
            && self.pause.is_none()
        {
            self.request_pause(PauseFor::Stop(StopReason::NodeLimit));
        }
    }

    /// Asks every worker to pause (a pause already under way keeps its reason unless this one is
    /// a stop or a failure).
    pub fn request_pause(&mut self, why: PauseFor) {
        if self.outcome.is_some() || self.ending.is_some() {
            return;
        }
        match &self.pause {
            None => {
                self.pause = Some(why);
                for (w, slot) in self.slots.iter().enumerate() {
                    if matches!(slot.state, State::Running) {
                        self.outbox.push_back((w as u32, PeerMsg::Pause));
                    }
                }
            }
            // A stop outranks a checkpoint, and a failure outranks both.
            Some(PauseFor::Checkpoint) => self.pause = Some(why),
            Some(PauseFor::Stop(_)) if matches!(why, PauseFor::Fail(_)) => self.pause = Some(why),
            Some(_) => {}
        }
    }

    /// When the pause is complete: every worker paused (or finished) and every work message
    /// arrived. Returns the reason, once; the snapshot is then [`RunView::pending_jobs`].
    pub fn pause_complete(&mut self) -> Option<PauseFor> {
        let why = self.pause.clone()?;
        if self.snapshot.is_some() {
            return None;
        }
        let mut sent = 0;
        let mut received = 0;
        for slot in &self.slots {
            match &slot.state {
                State::Running => return None,
                State::Paused { sent: s, received: r, .. } => {
                    sent += s;
                    received += r + slot.late_messages;
                }
                State::Finished => {}
            }
        }
        if sent != received {
            return None;
        }
        let mut jobs = Vec::new();
        for slot in &self.slots {
            if let State::Paused { stack, .. } = &slot.state {
                jobs.extend(stack.iter().map(|r| Pending { depth: r.depth, node: r.node.clone() }));
            }
            jobs.extend(slot.late.iter().map(|r| Pending { depth: r.depth, node: r.node.clone() }));
        }
        self.snapshot = Some(jobs);
        Some(why)
    }

    /// After a checkpoint: every worker carries on with its own stack (and the work that reached it).
    pub fn resume(&mut self) {
        self.snapshot = None;
        self.pause = None;
        for (w, slot) in self.slots.iter_mut().enumerate() {
            if let State::Paused { stack, .. } = std::mem::replace(&mut slot.state, State::Running) {
                let mut nodes = stack;
                nodes.append(&mut slot.late);
                slot.late_messages = 0;
                self.outbox.push_back((w as u32, PeerMsg::Resume(nodes)));
            }
        }
    }

    /// Ends the run as `outcome` once every worker has finished.
    pub fn finish(&mut self, outcome: Outcome) {
        self.ending.get_or_insert(outcome);
        for (w, slot) in self.slots.iter().enumerate() {
            if !matches!(slot.state, State::Finished) {
                self.outbox.push_back((w as u32, PeerMsg::Finish));
            }
        }
    }

    pub fn poll_send(&mut self) -> Option<(u32, PeerMsg)> {
        self.outbox.pop_front()
    }

    pub fn output(&self) -> &[u8] {
        &self.output
    }

    pub fn clear_output(&mut self) {
        self.output.clear();
    }

    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    /// A pause is under way or done.
    pub fn pausing(&self) -> Option<&PauseFor> {
        self.pause.as_ref()
    }

    fn queued_nodes(&self) -> usize {
        self.slots.iter().map(|s| s.stack as usize).sum()
    }
}

impl RunView for Coordinator {
    fn mode(&self) -> &'static str {
        "polling"
    }

    fn totals(&self) -> &Totals {
        &self.totals
    }

    fn queued(&self) -> usize {
        self.queued_nodes()
    }

    fn in_flight(&self) -> usize {
        0
    }

    fn workers(&self) -> usize {
        self.slots.iter().filter(|s| !matches!(s.state, State::Finished)).count()
    }

    fn busy_workers(&self) -> usize {
        self.slots.iter().filter(|s| s.stack > 0).count()
    }

    fn workers_seen(&self) -> u64 {
        self.slots.len() as u64
    }

    fn budget(&self) -> Option<&BudgetController> {
        None
    }

    fn order(&self) -> Option<Order> {
        None
    }

    fn peak_queued(&self) -> usize {
        self.peak
    }

    fn pending_jobs(&self) -> Vec<Pending> {
        self.snapshot.clone().unwrap_or_default()
    }

    fn pending_at(&self, _i: usize) -> Option<&Pending> {
        None
    }

    fn job_sizes(&self) -> &[u64] {
        &[]
    }
}
