//! The coordinator of a random-polling run, as a state machine without I/O (like the scheduler of
//! budget mode): it commits what workers report, pauses them for checkpoints and stops, knows when
//! the run is over, and rolls the run back when a remote process is lost. Drivers deliver its
//! messages ([`poll_send`](Coordinator::poll_send)) and write its committed output.
//!
//! # Why every node is counted exactly once
//! A worker reports a node as visited once it has visited it, with its output record; a node is on
//! exactly one stack or in one work message at a time (see `bts_worker::polling`). A snapshot is
//! taken only when every worker has paused, handing over its stack, and every work message sent
//! has arrived (sent and received counts agree): the snapshot then holds every node not yet
//! reported, and the totals every node reported.
//!
//! # Termination across processes
//! Workers of several processes cannot share a counter. The coordinator instead collects, in waves,
//! every worker's counts of work messages sent and received and whether it is idle (the
//! double-counting form of Mattern's four-counter method). A worker becomes busy only by taking a
//! work message from its inbox, which raises its received count, and a message in flight is sent
//! but not received. So when two consecutive waves find every worker idle, the same counts in both,
//! and as many messages received as sent, no worker had work at any moment between the waves and no
//! work was travelling: the run is over. The coordinator's own `Start` and `Resume` messages give
//! work too, without a work message: a wave counts only once every worker reports having acted on
//! every one sent to it (`Counts::orders`).
//!
//! # Losing a process
//! A process that dies takes its workers' stacks with it. The coordinator keeps the last snapshot
//! (the start of the run, or the last pause: the driver pauses the workers of a distributed run
//! for a snapshot every so often, besides checkpoints); it then moves every worker to a new epoch (messages
//! of the old one are dropped), has them drop their stacks, rolls the totals back to the snapshot
//! (the driver cuts the output back to the snapshot's length) and hands the snapshot's nodes out
//! again. Only the work since the last snapshot is done twice, and it is counted once. A worker
//! that reports `Finished` before the coordinator told it to finish is lost the same way: in a
//! distributed run only the coordinator decides the end, so such a worker dropped its stack.
//!
//! # Losing a work message
//! A work message between two live processes can be lost too: the victim's connection to the
//! thief breaks (a reset, a peer port flooded with strangers) after the victim counted it as sent.
//! Nothing can tell it from one that is late but for time: when every worker is idle or paused,
//! more work messages were sent than received, and no count moves for a long while (longer than a
//! message can take), the coordinator rolls the run back as for a lost process.
//!
//! # A process that asks to leave
//! A process asked to stop (a signal to `bts worker`) leaves without a rollback: the coordinator
//! pauses every worker as for a checkpoint, deals the leaving workers' stacks to the others and
//! resumes them in a new epoch, then tells the leavers to finish. Work can reach a worker only in
//! answer to its own request, and every request a leaver made was of the old epoch: a victim
//! answers one with work only while it runs in that epoch, which ends with the pause (every work
//! message sent before it has arrived when the pause completes). So no node can reach a leaver
//! once it is told to finish, and its process may go.

use crate::best::{Incumbents, OptimumConfig};
use crate::joblist::deal;
use crate::scheduler::{Outcome, StopReason, Totals};
use crate::view::RunView;
use crate::{BudgetController, Order, Pending};
use bts_protocol::polling::{Counts, PeerMsg, PollReport, Progress};
use bts_protocol::{JobFailure, Returned};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Why the workers are paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PauseFor {
    /// A snapshot held in memory, for rollbacks (see "Losing a process"); then the run carries on.
    Snapshot,
    /// A checkpoint; then the run carries on.
    Checkpoint,
    /// The run stops.
    Stop(StopReason),
    /// A node failed; the run stops.
    Fail(JobFailure),
    /// Processes asked to leave; then the run carries on without them.
    Leave,
}

impl PauseFor {
    /// Which of two pauses asked for wins: a failure over a stop, a stop over a checkpoint, a
    /// checkpoint over a leave (whose leavers go when the checkpoint's pause ends), anything over
    /// a snapshot (every pause takes one).
    fn rank(&self) -> u8 {
        match self {
            PauseFor::Snapshot => 0,
            PauseFor::Leave => 1,
            PauseFor::Checkpoint => 2,
            PauseFor::Stop(_) => 3,
            PauseFor::Fail(_) => 4,
        }
    }
}

/// What workers that join a run nobody has started yet begin with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartPlan {
    /// Selective initialisation from the root among the first process's workers.
    Root(Returned),
    /// These nodes, dealt out among them.
    Nodes(Vec<Returned>),
}

#[derive(Debug)]
enum State {
    Running,
    Paused {
        stack: Vec<Returned>,
        sent: u64,
        received: u64,
    },
    Finished,
    /// It left the run (its process asked to), its stack dealt to the others. (A worker whose
    /// process was lost has no slot any more.)
    Left,
}

#[derive(Debug)]
struct Slot {
    state: State,
    /// Work that reached the worker while it was paused.
    late: Vec<Returned>,
    late_messages: u64,
    /// Nodes on its stack when it last said.
    stack: u64,
    /// `Start` and `Resume` messages sent to it (see [`Counts::orders`]).
    orders: u64,
    /// Its process asked to leave: it goes at the end of the next pause.
    leaving: bool,
}

impl Slot {
    fn new() -> Self {
        Slot { state: State::Running, late: Vec::new(), late_messages: 0, stack: 0, orders: 0, leaving: false }
    }

    fn live(&self) -> bool {
        !matches!(self.state, State::Left)
    }
}

/// The run as it was at the last snapshot.
#[derive(Clone, Debug)]
struct Snapshot {
    totals: Totals,
    jobs: Vec<Pending>,
}

/// A rollback under way: workers still to confirm their reset.
#[derive(Debug)]
struct Reset {
    waiting: BTreeSet<u32>,
    /// A pause that was asked for before the loss, asked again after the rollback.
    pause_after: Option<PauseFor>,
}

/// Termination waves (workers of several processes).
#[derive(Debug, Default)]
struct Waves {
    number: u64,
    /// The counts of the wave under way.
    current: Option<BTreeMap<u32, Counts>>,
    previous: Option<BTreeMap<u32, Counts>>,
    /// The last wave found every worker idle but work messages sent and not received: these
    /// counts (sent, received).
    unreceived: Option<(u64, u64)>,
}

/// Work messages sent and not received while nothing else happens (see "Losing a work message").
#[derive(Debug)]
struct Stall {
    /// What is waited for: the epoch, the pause number, and the work messages sent and received.
    waiting: (u32, u64, u64, u64),
    /// Looks at it that found it unchanged.
    looks: u64,
}

#[derive(Debug)]
pub struct Coordinator {
    totals: Totals,
    incumbents: Incumbents,
    /// The best records were written as the output (the target was reached, or the run ended).
    best_written: bool,
    /// Nodes committed before this segment of the run.
    nodes_before: u64,
    node_limit: Option<u64>,
    /// The workers of the run by index: local threads first, then each process's as it joins. A
    /// worker's slot goes once nothing more can come of it (its process lost, or its last word
    /// after leaving taken), so that a long run that processes join and leave again and again
    /// keeps slots for those taking part only (it kept one for every worker that ever joined, and
    /// looked at every one of them at each termination wave).
    slots: BTreeMap<u32, Slot>,
    /// The index of the next worker to join: every worker this segment has seen.
    next_worker: u32,
    pause: Option<PauseFor>,
    /// The pause is complete and its snapshot taken.
    snapshot: Option<Vec<Pending>>,
    last: Snapshot,
    /// The run ends like this once every worker has finished.
    ending: Option<Outcome>,
    outcome: Option<Outcome>,
    output: Vec<u8>,
    outbox: VecDeque<(u32, PeerMsg)>,
    /// Nodes on the workers' stacks, as they last said (the sum of `Slot::stack`).
    stacked: u64,
    peak: usize,
    /// Workers of several processes: termination by waves, rollback on loss.
    waves: Option<Waves>,
    epoch: u32,
    /// Pauses begun so far (the number of the current or last one).
    pauses: u64,
    reset: Option<Reset>,
    start: Option<StartPlan>,
    /// Work messages are taken for lost after this many looks at an unchanged stall (`None`:
    /// workers in one process, where no message can be lost).
    lost_work_after: Option<u64>,
    stall: Option<Stall>,
}

impl Coordinator {
    /// A run of `workers` local polling workers, carrying on from `totals` with `jobs` waiting.
    pub fn new(workers: u32, totals: Totals, node_limit: Option<u64>, jobs: Vec<Pending>) -> Self {
        Self {
            incumbents: Incumbents::new(OptimumConfig::default(), totals.best.as_ref()),
            best_written: false,
            nodes_before: totals.nodes,
            last: Snapshot { totals: totals.clone(), jobs },
            totals,
            node_limit,
            slots: (0..workers).map(|w| (w, Slot::new())).collect(),
            next_worker: workers,
            pause: None,
            snapshot: None,
            ending: None,
            outcome: None,
            output: Vec::new(),
            outbox: VecDeque::new(),
            stacked: 0,
            peak: 0,
            waves: None,
            epoch: 0,
            pauses: 0,
            reset: None,
            start: None,
            lost_work_after: None,
            stall: None,
        }
    }

    /// Workers of other processes take part: termination by waves, and `start` for the first of
    /// them when there are no local workers. Work messages sent and not received are taken for
    /// lost after `lost_work_after` calls of [`look_for_lost_work`](Self::look_for_lost_work)
    /// that find every worker idle or paused and no count moving: the caller makes that longer
    /// than a message can take.
    pub fn distributed(mut self, start: Option<StartPlan>, lost_work_after: u64) -> Self {
        self.waves = Some(Waves::default());
        self.lost_work_after = Some(lost_work_after.max(1));
        // A resumed run with nothing left and no local workers is over: no joiner need end it.
        let nothing_left = matches!(&start, Some(StartPlan::Nodes(nodes)) if nodes.is_empty());
        self.start = start;
        if nothing_left && self.slots.is_empty() {
            self.check_finished();
        }
        self
    }

    /// A branch and bound with these ties and target: workers are told the incumbent (that of the
    /// checkpoint resumed, if any) before anything else.
    pub fn optimising(mut self, config: OptimumConfig) -> Self {
        self.incumbents = Incumbents::new(config, self.totals.best.as_ref());
        self.tell_incumbent(0..self.next_worker);
        // A new target the saved incumbent reaches already.
        if self.incumbents.reached_target() {
            self.request_pause(PauseFor::Stop(StopReason::Target));
        }
        self
    }

    /// Tells `workers` the incumbent, if there is anything to tell.
    fn tell_incumbent(&mut self, workers: std::ops::Range<u32>) {
        let incumbent = self.incumbents.incumbent();
        if incumbent == bts_protocol::Incumbent::NONE {
            return;
        }
        for w in workers {
            self.outbox.push_back((w, PeerMsg::Incumbent(incumbent)));
        }
    }

    /// Takes a report's solutions: an improvement goes to every worker, and one that reaches the
    /// target stops the run (the best records when the workers have paused are its output).
    fn take_solutions(&mut self, solutions: Vec<bts_protocol::Solution>) {
        if solutions.is_empty() || !self.incumbents.offer(solutions, &mut self.totals.best) {
            return;
        }
        let live: Vec<u32> = self.slots.iter().filter(|(_, s)| s.live()).map(|(&w, _)| w).collect();
        let incumbent = self.incumbents.incumbent();
        for w in live {
            self.outbox.push_back((w, PeerMsg::Incumbent(incumbent)));
        }
        if self.incumbents.reached_target() && !self.best_written {
            self.request_pause(PauseFor::Stop(StopReason::Target));
        }
    }

    /// Commits the best records as the run's output.
    fn commit_best(&mut self) {
        self.best_written = true;
        self.incumbents.write(&mut self.totals, &mut self.output);
    }

    /// Whether a complete run's best records are still to be written: the driver saves the
    /// finished search first, then calls [`Coordinator::write_best`].
    pub fn best_due(&self) -> bool {
        self.outcome == Some(Outcome::Complete) && !self.best_written && self.totals.best.is_some()
    }

    /// Writes a complete run's best records to the output, once.
    pub fn write_best(&mut self) {
        if self.best_due() {
            self.commit_best();
        }
    }

    /// Workers of a new process: returns the index of the first. They begin with the start of the
    /// run, or nothing (they steal), or a pause under way.
    pub fn add_workers(&mut self, count: u32) -> u32 {
        let first = self.next_worker;
        self.next_worker += count;
        self.slots.extend((first..first + count).map(|w| (w, Slot::new())));
        self.tell_incumbent(first..first + count);
        // A wave under way did not ask the newcomers.
        self.cancel_waves();
        if self.reset.is_some() {
            // They get their share when the rollback completes.
            return first;
        }
        if self.ending.is_some() || self.pause.is_some() {
            // The end, or a pause under way, which must hear from them too: nodes not yet started
            // wait in the snapshot, for the workers the pause resumes.
            for w in first..first + count {
                let message = match self.ending {
                    Some(_) => PeerMsg::Finish,
                    None => PeerMsg::Pause { number: self.pauses },
                };
                self.outbox.push_back((w, message));
            }
            return first;
        }
        match self.start.take() {
            Some(plan) => self.deal(plan, first, count),
            None => {
                for w in first..first + count {
                    self.order(w, PeerMsg::Resume { nodes: Vec::new(), epoch: self.epoch });
                }
            }
        }
        first
    }

    /// Gives `plan` to workers `first..first + count`.
    fn deal(&mut self, plan: StartPlan, first: u32, count: u32) {
        match plan {
            StartPlan::Root(root) => {
                for i in 0..count {
                    let epoch = self.epoch;
                    self.order(first + i, PeerMsg::Start { root: root.clone(), index: i, of: count, epoch });
                }
            }
            StartPlan::Nodes(nodes) => {
                for (i, part) in deal(nodes, count as usize).into_iter().enumerate() {
                    self.order(first + i as u32, PeerMsg::Resume { nodes: part, epoch: self.epoch });
                }
            }
        }
    }

    /// Sends a `Start` or `Resume`, counted so that waves wait until the worker has acted on it.
    fn order(&mut self, worker: u32, message: PeerMsg) {
        if let Some(slot) = self.slots.get_mut(&worker) {
            slot.orders += 1;
        }
        self.outbox.push_back((worker, message));
    }

    /// The process running workers `first..first + count` is lost: roll back to the last snapshot.
    pub fn remove_workers(&mut self, first: u32, count: u32) {
        let workers: Vec<u32> = self.slots.range(first..first.saturating_add(count)).map(|(&w, _)| w).collect();
        if workers.is_empty() {
            // Nothing of it is left: its loss was taken already, or it left and said its last word.
            return;
        }
        if self.left(first, count) {
            // It left the run: it held nothing, and nothing more comes of it.
            for w in workers {
                self.slots.remove(&w);
            }
            return;
        }
        for w in workers {
            // Gone with its stack and the work that reached it, which the rollback redoes; what
            // it still says is dropped as a stranger's.
            self.set_stack(w, 0);
            self.slots.remove(&w);
        }
        if self.outcome.is_some() {
            return;
        }
        if self.ending.is_some() {
            self.check_finished();
            return;
        }
        self.roll_back("a process was lost");
    }

    /// Every worker goes back to the last snapshot, in a new epoch (see "Losing a process").
    fn roll_back(&mut self, what: &str) {
        self.epoch += 1;
        self.stall = None;
        // A stop or a failure under way is asked again after the rollback; a checkpoint or a
        // snapshot is not (the rollback takes the run back to the last one), and leavers ask again
        // (see `reset_complete`).
        let pause_after = match self.pause.take() {
            Some(PauseFor::Snapshot | PauseFor::Checkpoint | PauseFor::Leave) | None => {
                self.reset.as_mut().and_then(|r| r.pause_after.take())
            }
            other => other,
        };
        self.snapshot = None;
        let mut waiting = BTreeSet::new();
        self.stacked = 0;
        for (&w, slot) in self.slots.iter_mut() {
            if slot.live() {
                slot.state = State::Running;
                slot.late.clear();
                slot.late_messages = 0;
                slot.stack = 0;
                waiting.insert(w);
                self.outbox.push_back((w, PeerMsg::Reset { epoch: self.epoch }));
            }
        }
        self.cancel_waves();
        let (at, redo) = (self.last.totals.nodes, self.totals.nodes.saturating_sub(self.last.totals.nodes));
        match self.reset.is_some() {
            // The totals go back to the snapshot only when a rollback completes: counted once.
            true => tracing::warn!(
                epoch = self.epoch,
                "{what} during a rollback: the rollback starts again (no more nodes are visited again)"
            ),
            false => tracing::warn!(
                epoch = self.epoch,
                "{what}: back to the last snapshot, at {at} nodes (the {redo} visited since are visited again)"
            ),
        }
        self.reset = Some(Reset { waiting, pause_after });
    }

    /// When a rollback is complete (every worker reset): the totals are the snapshot's, the
    /// snapshot's nodes are dealt out again, and the output must be cut back to the returned length.
    pub fn reset_complete(&mut self) -> Option<u64> {
        if !self.reset.as_ref().is_some_and(|r| r.waiting.is_empty()) {
            return None;
        }
        let reset = self.reset.take().expect("checked");
        self.totals = self.last.totals.clone();
        // Solutions found since the snapshot are solutions still: the incumbent stays. (Best
        // records written as the output are in the snapshot: they are written only as the pause
        // that takes it completes.)
        self.totals.best = self.incumbents.best();
        self.output.clear();
        let nodes: Vec<Returned> = self.last.jobs.iter().cloned().map(Returned::from).collect();
        let live: Vec<u32> = self.slots.iter().filter(|(_, s)| s.live()).map(|(&w, _)| w).collect();
        if live.is_empty() {
            self.start = Some(StartPlan::Nodes(nodes));
        } else {
            let parts = deal(nodes, live.len());
            for (w, part) in live.into_iter().zip(parts) {
                self.order(w, PeerMsg::Resume { nodes: part, epoch: self.epoch });
            }
        }
        if let Some(why) = reset.pause_after {
            self.request_pause(why);
        }
        if self.slots.values().any(|s| s.leaving && s.live()) {
            self.request_pause(PauseFor::Leave);
        }
        Some(self.totals.output_bytes)
    }

    pub fn handle(&mut self, report: PollReport) {
        let worker = report_worker(&report);
        if let PollReport::Finished { pieces, moved, .. } = &report
            && self.slots.get(&worker).is_some_and(|s| matches!(s.state, State::Left))
        {
            // A leaver's last word: it paused before it was told to finish, so it visited nothing
            // since. Nothing more comes of it.
            self.totals.jobs += pieces;
            self.totals.returned += moved;
            self.slots.remove(&worker);
            return;
        }
        let slot_ok = self.slots.get(&worker).is_some_and(|s| s.live());
        if slot_ok && matches!(report, PollReport::Finished { .. }) && self.waves.is_some() && self.ending.is_none() {
            // Only the coordinator ends a distributed run: a worker that finishes untold (its
            // process hit an error) dropped its stack, so it is lost, whatever it says.
            tracing::warn!(worker, "a worker left the run on its own: back to the last snapshot");
            self.remove_workers(worker, 1);
            self.take_solutions_of(report);
            return;
        }
        let resetting = self.reset.as_ref().is_some_and(|r| r.waiting.contains(&worker));
        if !slot_ok || (resetting && !matches!(report, PollReport::ResetDone { .. })) {
            // A worker of a lost process, or a report of the epoch being rolled back.
            self.take_solutions_of(report);
            return;
        }
        match report {
            PollReport::Progress { worker, progress } => {
                self.set_stack(worker, progress.stack);
                self.commit(progress);
                self.check_node_limit();
            }
            PollReport::Paused { worker, stack, progress, sent, received, pieces, moved } => {
                self.commit(progress);
                self.totals.jobs += pieces;
                self.totals.returned += moved;
                self.check_node_limit();
                self.set_stack(worker, stack.len() as u64);
                if let Some(slot) = self.slots.get_mut(&worker) {
                    slot.state = State::Paused { stack, sent, received };
                }
            }
            PollReport::LateWork { worker, nodes } => {
                if let Some(slot) = self.slots.get_mut(&worker) {
                    slot.late_messages += 1;
                    slot.late.extend(nodes);
                }
            }
            PollReport::Failed { worker, failure } => {
                // The run's first failure is its error, which its end reports in full.
                let failing = |p: &Option<PauseFor>| matches!(p, Some(PauseFor::Fail(_)));
                let first = self.outcome.is_none()
                    && self.ending.is_none()
                    && !failing(&self.pause)
                    && !self.reset.as_ref().is_some_and(|r| failing(&r.pause_after));
                match first {
                    true => tracing::error!(worker, node = %failure.node, "a node failed; the run stops"),
                    false => tracing::error!(worker, node = %failure.node, "another node failed: {}", failure.message),
                }
                self.request_pause(PauseFor::Fail(failure));
            }
            PollReport::Finished { worker, progress, pieces, moved } => {
                self.commit(progress);
                self.totals.jobs += pieces;
                self.totals.returned += moved;
                self.set_stack(worker, 0);
                if let Some(slot) = self.slots.get_mut(&worker) {
                    slot.state = State::Finished;
                }
                self.check_finished();
            }
            PollReport::ResetDone { worker, epoch } => {
                // The answer to an earlier rollback does not complete this one.
                if let Some(r) = &mut self.reset
                    && epoch == self.epoch
                {
                    r.waiting.remove(&worker);
                }
            }
        }
    }

    /// Of a report that does not count, its solutions: they are feasible all the same, and may
    /// have raised an incumbent that the work done again would have to beat.
    fn take_solutions_of(&mut self, report: PollReport) {
        if let PollReport::Progress { progress, .. }
        | PollReport::Paused { progress, .. }
        | PollReport::Finished { progress, .. } = report
        {
            self.take_solutions(progress.solutions);
        }
    }

    /// The run's end, if it is decided already and only the workers' goodbyes are awaited: it
    /// ends so now (a complete run with its best records due: `write_best`).
    pub fn end_now(&mut self) -> Option<Outcome> {
        let ending = self.ending.clone()?;
        self.outcome = Some(ending.clone());
        Some(ending)
    }

    fn check_finished(&mut self) {
        if self.slots.values().all(|s| matches!(s.state, State::Finished | State::Left)) {
            // A complete run's output is its best records, however its end was found (every
            // worker finished, or the counts of a termination wave): `write_best` writes them.
            self.outcome = Some(self.ending.clone().unwrap_or(Outcome::Complete));
        }
    }

    fn commit(&mut self, mut p: Progress) {
        self.take_solutions(std::mem::take(&mut p.solutions));
        let t = &mut self.totals;
        t.pruned += p.pruned;
        t.nodes += p.visited;
        t.leaves = t.leaves.map(|l| l + p.leaves);
        t.max_depth = t.max_depth.map(|d| d.max(p.max_depth));
        t.outputs += p.outputs;
        t.output_bytes += p.output.len() as u64;
        self.output.extend_from_slice(&p.output);
    }

    /// Nodes this segment may still visit, by the committed count (`None`: no node limit).
    pub fn nodes_left(&self) -> Option<u64> {
        self.node_limit.map(|limit| limit.saturating_sub(self.totals.nodes - self.nodes_before))
    }

    fn check_node_limit(&mut self) {
        if let Some(limit) = self.node_limit
            && self.totals.nodes - self.nodes_before >= limit
        {
            // A checkpoint under way becomes a stop: workers waiting at the limit report nothing more.
            self.request_pause(PauseFor::Stop(StopReason::NodeLimit));
        }
    }

    /// Asks every worker to pause. A pause under way keeps its reason, unless this one outranks
    /// it: a stop outranks a checkpoint, a failure both.
    pub fn request_pause(&mut self, why: PauseFor) {
        if self.outcome.is_some() || self.ending.is_some() {
            return;
        }
        if let Some(reset) = &mut self.reset {
            // (A snapshot is not: the run goes back to one.)
            if why != PauseFor::Snapshot && reset.pause_after.as_ref().is_none_or(|p| why.rank() > p.rank()) {
                reset.pause_after = Some(why);
            }
            return;
        }
        match &self.pause {
            None => {
                self.pause = Some(why);
                self.pauses += 1;
                // Counts of paused workers say nothing of the nodes the coordinator holds.
                self.cancel_waves();
                for (&w, slot) in &self.slots {
                    if matches!(slot.state, State::Running) {
                        self.outbox.push_back((w, PeerMsg::Pause { number: self.pauses }));
                    }
                }
            }
            Some(current) if why.rank() > current.rank() => self.pause = Some(why),
            Some(_) => {}
        }
    }

    /// When the pause is complete: every worker paused (or done) and every work message arrived.
    /// Returns the reason, once; the snapshot is then [`RunView::pending_jobs`].
    pub fn pause_complete(&mut self) -> Option<PauseFor> {
        let why = self.pause.clone()?;
        if self.snapshot.is_some() || self.reset.is_some() {
            return None;
        }
        let (sent, received) = self.paused_counts()?;
        if sent != received {
            return None;
        }
        let pending = |r: &Returned| Pending::from(r.clone());
        // Each worker's nodes, the next it would have visited first; the snapshot takes the first
        // of every worker, then the second of every worker, and so on. A run resumed from it takes
        // them in that order: every worker's next node first, as the paused run would have (a
        // branch and bound resumed in budget mode otherwise searched all of one worker's nodes
        // before the other's most promising, with a poor incumbent, and sometimes 100 times the
        // nodes); resumed in random polling with as many workers, each gets its own back.
        let stacks: Vec<Vec<Pending>> = self
            .slots
            .values()
            .filter(|s| s.live())
            .map(|slot| {
                let stack = match &slot.state {
                    State::Paused { stack, .. } => &stack[..],
                    _ => &[],
                };
                stack.iter().chain(&slot.late).map(pending).collect()
            })
            .collect();
        let longest = stacks.iter().map(Vec::len).max().unwrap_or(0);
        let mut jobs: Vec<Pending> =
            (0..longest).flat_map(|i| stacks.iter().filter_map(move |s| s.get(i).cloned())).collect();
        // Nodes nobody has started yet: no process has joined, or every one was lost.
        match &self.start {
            Some(StartPlan::Root(root)) => jobs.push(pending(root)),
            Some(StartPlan::Nodes(nodes)) => jobs.extend(nodes.iter().map(pending)),
            None => {}
        }
        // A stop (a target reached, a limit, a signal): the output is the best records of the
        // paused run, as the final checkpoint (taken next) records it.
        if matches!(why, PauseFor::Stop(_)) && !self.best_written {
            self.commit_best();
        }
        self.last = Snapshot { totals: self.totals.clone(), jobs: jobs.clone() };
        self.snapshot = Some(jobs);
        Some(why)
    }

    /// After a pause that did not stop the run: the workers whose processes asked to leave are told
    /// to finish and their nodes dealt to the others, in a new epoch (see the module's comment);
    /// every other worker carries on with its own stack (and the work that reached it). A snapshot
    /// that holds no node is the end of the run instead: every work message had arrived, so no node
    /// is left anywhere (pauses that come faster than termination waves would otherwise keep
    /// cancelling them).
    pub fn resume(&mut self) {
        if self.snapshot.as_ref().is_some_and(Vec::is_empty) {
            self.finish(Outcome::Complete);
            return;
        }
        self.snapshot = None;
        self.pause = None;
        let leavers: Vec<u32> = self
            .slots
            .iter()
            .filter(|(_, s)| s.leaving && matches!(s.state, State::Paused { .. }))
            .map(|(&w, _)| w)
            .collect();
        let (leaving, mut handed) = (leavers.len(), Vec::new());
        if leaving > 0 {
            self.epoch += 1;
        }
        for w in leavers {
            self.set_stack(w, 0);
            let slot = self.slots.get_mut(&w).expect("a leaver's slot");
            if let State::Paused { stack, .. } = std::mem::replace(&mut slot.state, State::Left) {
                handed.extend(stack);
            }
            handed.append(&mut slot.late);
            slot.late_messages = 0;
            self.outbox.push_back((w, PeerMsg::Finish));
        }
        if leaving > 0 {
            let (epoch, nodes) = (self.epoch, handed.len());
            tracing::info!(workers = leaving, nodes, epoch, "workers leave the run, handing their nodes over");
        }
        let stayers: Vec<u32> =
            self.slots.iter().filter(|(_, s)| matches!(s.state, State::Paused { .. })).map(|(&w, _)| w).collect();
        if !stayers.is_empty() {
            // Nodes nobody had started (the first workers joined during the pause).
            match self.start.take() {
                Some(StartPlan::Root(root)) => handed.push(root),
                Some(StartPlan::Nodes(nodes)) => handed.extend(nodes),
                None => {}
            }
        }
        if stayers.is_empty() && !handed.is_empty() {
            // Nobody is left to take them: the next process to join does.
            let mut nodes = match self.start.take() {
                Some(StartPlan::Root(root)) => vec![root],
                Some(StartPlan::Nodes(nodes)) => nodes,
                None => Vec::new(),
            };
            nodes.append(&mut handed);
            self.start = Some(StartPlan::Nodes(nodes));
        }
        let mut parts = deal(handed, stayers.len()).into_iter();
        for w in stayers {
            let slot = self.slots.get_mut(&w).expect("a stayer's slot");
            if let State::Paused { stack, .. } = std::mem::replace(&mut slot.state, State::Running) {
                let mut nodes = stack;
                nodes.append(&mut slot.late);
                nodes.extend(parts.next().unwrap_or_default());
                slot.late_messages = 0;
                slot.orders += 1;
                let count = nodes.len() as u64;
                self.outbox.push_back((w, PeerMsg::Resume { nodes, epoch: self.epoch }));
                self.set_stack(w, count);
            }
        }
    }

    /// The process running workers `first..first + count` asks to leave the run (it was told to
    /// stop): its workers go, with nothing lost, at the end of the next pause.
    pub fn leave(&mut self, first: u32, count: u32) {
        if self.outcome.is_some() || self.ending.is_some() {
            return;
        }
        let mut asked = false;
        for slot in self.slots.range_mut(first..first.saturating_add(count)).map(|(_, s)| s) {
            if slot.live() && !slot.leaving {
                slot.leaving = true;
                asked = true;
            }
        }
        if asked {
            self.request_pause(PauseFor::Leave);
        }
    }

    /// Whether every worker of `first..first + count` has left the run: their process may go.
    pub fn left(&self, first: u32, count: u32) -> bool {
        let mut slots = self.slots.range(first..first.saturating_add(count)).map(|(_, s)| s).peekable();
        slots.peek().is_some() && slots.all(|s| matches!(s.state, State::Left))
    }

    /// Ends the run as `outcome` once every worker has finished. A stop whose snapshot holds no
    /// node (a node limit equal to the tree's size, say) is the end of the run.
    pub fn finish(&mut self, outcome: Outcome) {
        let outcome = match outcome {
            Outcome::Stopped(_) if self.snapshot.as_ref().is_some_and(Vec::is_empty) => Outcome::Complete,
            other => other,
        };
        self.ending.get_or_insert(outcome);
        for (&w, slot) in &self.slots {
            if matches!(slot.state, State::Running | State::Paused { .. }) {
                self.outbox.push_back((w, PeerMsg::Finish));
            }
        }
        self.check_finished();
    }

    /// Called at a steady pace: rolls the run back when work messages sent have not been received
    /// for `lost_work_after` calls (see [`distributed`](Self::distributed)) while every worker is idle or paused
    /// and nothing moves (see "Losing a work message").
    pub fn look_for_lost_work(&mut self) {
        let Some(limit) = self.lost_work_after else { return };
        let waiting = self.unreceived_work().map(|(sent, received)| (self.epoch, self.pauses, sent, received));
        match (&mut self.stall, waiting) {
            (Some(stall), Some(waiting)) if stall.waiting == waiting => stall.looks += 1,
            (_, waiting) => self.stall = waiting.map(|waiting| Stall { waiting, looks: 0 }),
        }
        if let Some(stall) = self.stall.as_ref().filter(|s| s.looks >= limit) {
            let (_, _, sent, received) = stall.waiting;
            let what = format!(
                "{} of {sent} work messages between workers never arrived (a connection between two processes broke)",
                sent.saturating_sub(received)
            );
            self.roll_back(&what);
        }
    }

    /// Work messages sent and received, when fewer were received and no worker is working: in a
    /// pause, or as the last termination wave found them.
    fn unreceived_work(&self) -> Option<(u64, u64)> {
        if self.reset.is_some() || self.ending.is_some() || self.outcome.is_some() {
            return None;
        }
        if self.pause.is_none() {
            return self.waves.as_ref()?.unreceived;
        }
        if self.snapshot.is_some() {
            return None;
        }
        let (sent, received) = self.paused_counts()?;
        (sent != received).then_some((sent, received))
    }

    /// Work messages sent and received by the paused workers (late ones included), once none
    /// runs.
    fn paused_counts(&self) -> Option<(u64, u64)> {
        let (mut sent, mut received) = (0, 0);
        for slot in self.slots.values() {
            match &slot.state {
                State::Running => return None,
                State::Paused { sent: s, received: r, .. } => {
                    sent += s;
                    received += r + slot.late_messages;
                }
                State::Finished | State::Left => {}
            }
        }
        Some((sent, received))
    }

    /// Starts a termination wave, when one is due: not during a pause, a rollback or the end, and
    /// not while the previous wave is still collecting. Returns its number.
    pub fn start_wave(&mut self) -> Option<u64> {
        let due = self.waves_count();
        let waves = self.waves.as_mut()?;
        if !due || waves.current.is_some() {
            return None;
        }
        waves.number += 1;
        waves.current = Some(BTreeMap::new());
        Some(waves.number)
    }

    /// Counts for wave `wave`. When every live worker has answered, two agreeing waves end the run.
    pub fn wave_counts(&mut self, wave: u64, counts: Vec<Counts>) {
        if !self.waves_count() {
            return;
        }
        let live: BTreeSet<u32> =
            self.slots.iter().filter(|(_, s)| matches!(s.state, State::Running)).map(|(&w, _)| w).collect();
        let Some(waves) = self.waves.as_mut() else { return };
        if wave != waves.number {
            return;
        }
        let Some(current) = waves.current.as_mut() else { return };
        for c in counts {
            current.insert(c.worker, c);
        }
        if !live.iter().all(|w| current.contains_key(w)) {
            return;
        }
        let current: BTreeMap<u32, Counts> =
            waves.current.take().expect("checked").into_iter().filter(|(w, _)| live.contains(w)).collect();
        // Counts taken before a worker acted on the coordinator's last order may miss work it got.
        let obeyed = current.iter().all(|(w, c)| self.slots.get(w).is_some_and(|s| c.orders == s.orders));
        let idle = obeyed && current.values().all(|c| c.idle);
        let sent = current.values().map(|c| c.sent).sum::<u64>();
        let received = current.values().map(|c| c.received).sum::<u64>();
        let quiet = idle && sent == received;
        waves.unreceived = (idle && sent != received).then_some((sent, received));
        let done = quiet && waves.previous.as_ref() == Some(&current);
        waves.previous = quiet.then_some(current);
        if done {
            self.finish(Outcome::Complete);
        }
    }

    /// Whether workers' counts can tell the end of the run: not during a pause or a rollback (the
    /// coordinator holds nodes), at the end, or before any worker has the start.
    fn waves_count(&self) -> bool {
        self.pause.is_none() && self.reset.is_none() && self.ending.is_none() && self.start.is_none()
    }

    /// Forgets the wave under way and the last one: they no longer describe the run.
    fn cancel_waves(&mut self) {
        if let Some(waves) = &mut self.waves {
            waves.current = None;
            waves.previous = None;
            waves.unreceived = None;
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

    /// Records that worker `w` has `nodes` on its stack.
    fn set_stack(&mut self, w: u32, nodes: u64) {
        let Some(slot) = self.slots.get_mut(&w) else { return };
        self.stacked = self.stacked - slot.stack + nodes;
        slot.stack = nodes;
        self.peak = self.peak.max(self.stacked as usize);
    }
}

fn report_worker(report: &PollReport) -> u32 {
    match report {
        PollReport::Progress { worker, .. }
        | PollReport::Paused { worker, .. }
        | PollReport::LateWork { worker, .. }
        | PollReport::Failed { worker, .. }
        | PollReport::Finished { worker, .. }
        | PollReport::ResetDone { worker, .. } => *worker,
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
        // Once paused for good (a stop), the nodes left are the snapshot's; while no process has
        // them, those the coordinator keeps for the next to join.
        let kept = match &self.start {
            Some(StartPlan::Root(_)) => 1,
            Some(StartPlan::Nodes(nodes)) => nodes.len(),
            None => 0,
        };
        self.snapshot.as_ref().map_or_else(|| self.stacked as usize + kept, Vec::len)
    }

    fn in_flight(&self) -> usize {
        0
    }

    fn searched_all(&self) -> bool {
        self.outcome == Some(Outcome::Complete)
    }

    /// The workers taking part, those done at the end included (the history's last row).
    fn workers(&self) -> usize {
        self.slots.values().filter(|s| s.live()).count()
    }

    fn busy_workers(&self) -> usize {
        self.slots.values().filter(|s| s.stack > 0).count()
    }

    fn workers_seen(&self) -> u64 {
        u64::from(self.next_worker)
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

#[cfg(test)]
mod tests {
    use super::*;
    use bts_protocol::NodeBytes;

    fn node() -> Returned {
        Returned { depth: 0, node: NodeBytes::from_slice(b"n") }
    }

    /// A long run that remote processes join and leave again and again (lost, or leaving when
    /// told to stop) keeps slots for the workers taking part only: it kept one for every worker
    /// that ever joined, a little memory and a longer look at each termination wave every time.
    #[test]
    fn workers_gone_for_good_leave_no_slot_behind() {
        let mut c =
            Coordinator::new(0, Totals::default(), None, Vec::new()).distributed(Some(StartPlan::Root(node())), 100);
        for i in 0..1000u32 {
            let first = c.add_workers(1);
            if i % 2 == 0 {
                // Lost: its connection closed; the rollback completes at once (no one else to reset).
                c.remove_workers(first, 1);
                assert!(c.reset_complete().is_some());
            } else {
                // Told to stop: it asks to leave, pauses, hands its stack over and finishes.
                c.leave(first, 1);
                let progress = Progress::default();
                let (sent, received, pieces, moved) = (0, 0, 0, 1);
                c.handle(PollReport::Paused {
                    worker: first,
                    stack: vec![node()],
                    progress,
                    sent,
                    received,
                    pieces,
                    moved,
                });
                assert_eq!(c.pause_complete(), Some(PauseFor::Leave));
                c.resume();
                assert!(c.left(first, 1), "its process may go");
                if i % 4 == 1 {
                    let jobs = c.totals().jobs;
                    let finished =
                        PollReport::Finished { worker: first, progress: Progress::default(), pieces: 1, moved: 0 };
                    c.handle(finished);
                    assert_eq!(c.totals().jobs, jobs + 1, "a leaver's last word still counts");
                } else {
                    // Its connection closed before its last word (the driver passes that on).
                    c.remove_workers(first, 1);
                }
            }
            while c.poll_send().is_some() {}
        }
        assert!(c.slots.is_empty(), "{} slots kept for 1000 workers gone", c.slots.len());
        assert_eq!(c.workers_seen(), 1000);
        assert_eq!(c.workers(), 0);
        assert_eq!(c.outcome(), None, "the run goes on: the next process to join gets its nodes");
    }
}
