//! Random polling (Sanders): every worker owns a depth-first stack; a worker that runs dry asks a
//! uniformly random other worker for work, and the busy one splits its stack and sends part of it.
//! No central job list: the coordinator only starts the run, commits what workers report, pauses
//! them for checkpoints and ends the run.
//!
//! # Termination
//! `Termination::Counter` counts the workers that hold work plus the work messages in flight. A
//! victim counts a piece of work before sending it; a thief that holds no work inherits that count,
//! one that already does gives it back; a worker takes itself off only when its stack runs dry. The
//! count therefore reaches zero exactly when no stack holds a node and no node travels, and it
//! cannot rise again from zero (only a worker with work can give work): the worker that brings it
//! to zero tells everyone the run is over.
//!
//! # Pausing
//! On `Pause` a worker hands its stack, its progress and its counts of work messages sent and
//! received to the coordinator, then answers every request with `NoWork` and forwards any work that
//! still reaches it and was sent before its victim paused. Once every worker has paused, no work
//! message can be sent any more; when the received counts catch up with the sent ones, the
//! coordinator holds every unvisited node: a consistent snapshot. Work sent by a victim that has
//! already resumed (to a thief that has not yet) is not the snapshot's: the thief keeps it for when
//! it resumes, telling the two apart by the pause number each piece carries.

use crate::StackWorker;
use crate::estimate::SplitMix64;
use bts_protocol::polling::{Counts, PeerMsg, PollReport, Progress, SplitRule};
use bts_protocol::{JobFailure, JobId, Returned};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::{Duration, Instant};

/// A thief that has no answer to its request after this long asks again: between processes, a
/// request or its answer can go with a connection that breaks.
const ANSWER_WAIT: Duration = Duration::from_secs(1);

/// How messages reach other workers: channels between threads, or connections between processes.
pub trait Peers: Send + Sync {
    /// Workers in the run (indices `0..count`).
    fn count(&self) -> u32;

    /// A worker other than `me` to ask for work, among those still in the run, each as likely
    /// (`draw(n)` picks one of `0..n` uniformly); `None` if there is none.
    fn victim(&self, me: u32, draw: &mut dyn FnMut(u32) -> u32) -> Option<u32> {
        pick(std::iter::once(0..self.count()), me, draw)
    }

    fn send(&self, to: u32, message: PeerMsg);
}

/// One index of the disjoint `ranges` other than `me`, each as likely (see [`Peers::victim`]).
pub fn pick<R>(ranges: R, me: u32, draw: &mut dyn FnMut(u32) -> u32) -> Option<u32>
where
    R: IntoIterator<Item = std::ops::Range<u32>>,
    R::IntoIter: Clone,
{
    let ranges = ranges.into_iter();
    let others = |r: &std::ops::Range<u32>| r.len() as u32 - u32::from(r.contains(&me));
    let n: u32 = ranges.clone().map(|r| others(&r)).sum();
    let mut k = (n > 0).then(|| draw(n))?;
    for r in ranges {
        if k < others(&r) {
            let id = r.start + k;
            return Some(if r.contains(&me) && id >= me { id + 1 } else { id });
        }
        k -= others(&r);
    }
    None
}

/// Every worker a thread of this process.
impl Peers for Vec<Sender<PeerMsg>> {
    fn count(&self) -> u32 {
        self.len() as u32
    }

    fn send(&self, to: u32, message: PeerMsg) {
        if let Some(inbox) = self.get(to as usize) {
            let _ = inbox.send(message);
        }
    }
}

/// How the end of the run is detected.
pub enum Termination {
    /// All workers are threads of this process: a count of busy workers and work in flight (see
    /// the module's documentation); the worker that brings it to zero ends the run.
    Counter(AtomicUsize),
    /// Workers in several processes: each exposes its counts, and the coordinator ends the run
    /// when two waves of counts agree (see `bts_master::polling`). `first` is the index of this
    /// process's first worker.
    Waves { first: u32, counts: Vec<WaveCounts> },
}

/// A worker's counts for termination waves.
#[derive(Debug, Default)]
pub struct WaveCounts {
    idle: AtomicBool,
    sent: AtomicU64,
    received: AtomicU64,
    orders: AtomicU64,
}

impl Termination {
    /// Counts for distributed termination, for `workers` workers from index `first`. They start
    /// busy: a worker says it is idle only once it has looked at what it starts with.
    pub fn waves(first: u32, workers: u32) -> Self {
        let counts = (0..workers).map(|_| WaveCounts::default()).collect();
        Termination::Waves { first, counts }
    }

    /// The counts of this process's workers, for a wave.
    pub fn snapshot(&self) -> Vec<Counts> {
        let Termination::Waves { first, counts } = self else { return Vec::new() };
        counts
            .iter()
            .enumerate()
            .map(|(i, c)| {
                // Orders and received before idle: a worker that took work and ran dry since shows
                // a change.
                let orders = c.orders.load(Ordering::SeqCst);
                let received = c.received.load(Ordering::SeqCst);
                let sent = c.sent.load(Ordering::SeqCst);
                let idle = c.idle.load(Ordering::SeqCst);
                Counts { worker: first + i as u32, idle, sent, received, orders }
            })
            .collect()
    }

    fn counts(&self, me: u32) -> Option<&WaveCounts> {
        match self {
            Termination::Waves { first, counts } => counts.get((me - first) as usize),
            Termination::Counter(_) => None,
        }
    }
}

/// What the workers of a process share.
pub struct Shared {
    pub peers: Box<dyn Peers>,
    pub termination: Termination,
    /// Nodes that may still be visited (`u64::MAX`: no limit).
    pub remaining: AtomicU64,
    pub rule: SplitRule,
}

impl Shared {
    /// Takes up to `want` nodes of the node limit.
    fn reserve(&self, want: u64) -> u64 {
        let mut current = self.remaining.load(Ordering::Relaxed);
        loop {
            if current == u64::MAX {
                return want;
            }
            let take = want.min(current);
            if take == 0 {
                return 0;
            }
            match self.remaining.compare_exchange_weak(current, current - take, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return take,
                Err(now) => current = now,
            }
        }
    }

    fn unreserve(&self, unused: u64) {
        if unused > 0 && self.remaining.load(Ordering::Relaxed) != u64::MAX {
            self.remaining.fetch_add(unused, Ordering::Relaxed);
        }
    }
}

/// Busy workers look at their inbox about this often, whatever a node costs (Sanders: the polling
/// interval Δt should make polling a small share ε of the work; an empty inbox costs a few
/// nanoseconds to look at, so checking every 20 µs costs well under 1%).
const POLL_EVERY: Duration = Duration::from_micros(20);
/// Progress goes to the coordinator about this often.
const REPORT_EVERY: Duration = Duration::from_millis(2);

/// How a worker gets its first work.
pub enum Start {
    /// A new run: Sanders' selective initialisation. Every worker takes the root and splits it
    /// ⌈log2 P⌉ times following the bits of its index, keeping its own part (see [`selective_start`]).
    /// `of` is P, the number of workers that share the root, fixed when the run is planned: the
    /// number of peers may grow before a worker begins, as processes join.
    Selective { root: Returned, of: u32 },
    /// A new run: worker 0 takes the root, the others start by stealing.
    Plain(Returned),
    /// These nodes (a resumed run).
    Nodes(Vec<Returned>),
    /// Whatever the coordinator sends (`Start` or `Resume`): workers of other processes.
    Await,
}

/// Worker `me`'s part of a new run from `root`, among `workers`: at round k the workers sharing
/// the low k bits of their index expand the same nodes until two wait, then split them by `rule`,
/// those with bit k set taking the part given away. Every worker of a group visits the group's
/// nodes, but only its lowest-numbered worker counts them: the returned progress is what this
/// worker must report.
pub fn selective_start(
    stack: &mut dyn StackWorker,
    root: Returned,
    me: u32,
    workers: u32,
    rule: SplitRule,
) -> Result<Progress, JobFailure> {
    let undecodable = |e| JobFailure::new(JobId(0), "(the root)", e);
    stack.push(vec![root]).map_err(undecodable)?;
    let mut counted = Progress::default();
    let rounds = u32::BITS - workers.saturating_sub(1).leading_zeros();
    for k in 0..rounds {
        let group = 1u32 << k;
        if (me & (group - 1)) + group >= workers {
            // Nobody takes the other half at this round.
            continue;
        }
        let leader = me < group;
        while stack.len() == 1 {
            stack.expand_top()?;
            let mut p = stack.take_progress();
            if leader {
                counted.merge(p);
            } else {
                // A solution offered here raised the incumbent this process's workers share: the
                // leader's visit of the same node may no longer offer it.
                counted.solutions.append(&mut p.solutions);
            }
        }
        if stack.len() < 2 {
            break;
        }
        let given = stack.split(rule);
        if me & group != 0 {
            stack.take_all();
            stack.push(given).map_err(undecodable)?;
        }
    }
    Ok(counted)
}

struct Worker<'a> {
    me: u32,
    stack: Box<dyn StackWorker>,
    inbox: Receiver<PeerMsg>,
    shared: Arc<Shared>,
    report: &'a mut dyn FnMut(PollReport) -> bool,
    rng: SplitMix64,
    epoch: u32,
    /// Work messages sent and received in this epoch.
    sent: u64,
    received: u64,
    /// Pieces of work and nodes received over the whole run (for the summary).
    pieces: u64,
    moved: u64,
    /// Nodes visited between looks at the inbox.
    interval: u64,
    last_report: Instant,
    /// A pause or a reset happened: any answer to an earlier request went elsewhere.
    resumed: bool,
    /// The coordinator's `Start` and `Resume` messages acted on.
    orders: u64,
    /// The number of the last pause.
    pauses: u64,
    /// With `Termination::Counter`: this worker is counted (it holds work).
    counted: bool,
}

/// Why the worker loop ends.
enum Stop {
    Finish,
    /// The coordinator is gone.
    Gone,
}

/// Runs worker `me` until the run ends. With [`Termination::Counter`], every worker must be counted
/// busy before any starts; a worker that starts with nothing takes itself off. `Err`: the worker
/// died outside any node's visit (a node that does not serialise as it is handed on); its stack
/// went with it, so the run cannot go on, nor wait for it.
pub fn run_polling_worker(
    me: u32,
    stack: Box<dyn StackWorker>,
    start: Start,
    inbox: Receiver<PeerMsg>,
    shared: Arc<Shared>,
    report: &mut dyn FnMut(PollReport) -> bool,
    seed: u64,
) -> Result<(), JobFailure> {
    let run = || {
        let mut w = Worker {
            me,
            stack,
            inbox,
            shared,
            report,
            rng: SplitMix64::new(seed ^ u64::from(me).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            epoch: 0,
            sent: 0,
            received: 0,
            pieces: 0,
            moved: 0,
            interval: 16,
            last_report: Instant::now(),
            resumed: false,
            orders: 0,
            pauses: 0,
            counted: true,
        };
        let stop = match w.begin(start) {
            Some(stop) => stop,
            None => w.run(),
        };
        if let Stop::Finish = stop {
            let progress = w.stack.take_progress();
            let (pieces, moved) = (w.pieces, w.moved);
            let _ = (w.report)(PollReport::Finished { worker: me, progress, pieces, moved });
        }
    };
    crate::unwind::catch(run).map_err(|why| {
        JobFailure::new(JobId(0), "(the nodes on its stack)", format!("random-polling worker {me} died: {why}"))
    })
}

impl Worker<'_> {
    fn begin(&mut self, start: Start) -> Option<Stop> {
        let begun = match start {
            Start::Selective { root, of } => selective_start(&mut *self.stack, root, self.me, of, self.shared.rule),
            Start::Plain(root) => self.push(if self.me == 0 { vec![root] } else { Vec::new() }),
            Start::Nodes(nodes) => self.push(nodes),
            Start::Await => return self.wait_for_coordinator(),
        };
        self.started(begun);
        None
    }

    fn push(&mut self, nodes: Vec<Returned>) -> Result<Progress, JobFailure> {
        let failed = |e| JobFailure::new(JobId(0), "(a starting node)", e);
        self.stack.push(nodes).map(|_| Progress::default()).map_err(failed)
    }

    /// Reports what starting did, and takes the worker off the busy count if it got nothing.
    fn started(&mut self, begun: Result<Progress, JobFailure>) {
        match begun {
            Ok(progress) if progress.visited > 0 || progress.pruned > 0 || !progress.solutions.is_empty() => {
                let _ = (self.report)(PollReport::Progress { worker: self.me, progress });
            }
            Ok(_) => {}
            Err(failure) => {
                let _ = (self.report)(PollReport::Failed { worker: self.me, failure });
            }
        }
        if self.stack.is_empty() {
            self.ran_dry();
        } else {
            self.set_idle(false);
        }
    }

    /// Counts a `Start` or `Resume` acted on, once its work is on the stack and `idle` says so.
    fn obeyed(&mut self) {
        self.orders += 1;
        if let Some(c) = self.shared.termination.counts(self.me) {
            c.orders.store(self.orders, Ordering::SeqCst);
        }
    }

    fn set_idle(&self, idle: bool) {
        if let Some(c) = self.shared.termination.counts(self.me) {
            c.idle.store(idle, Ordering::SeqCst);
        }
    }

    /// The stack just emptied.
    fn ran_dry(&mut self) {
        match &self.shared.termination {
            Termination::Counter(busy) => {
                if std::mem::take(&mut self.counted) && busy.fetch_sub(1, Ordering::SeqCst) == 1 {
                    for w in 0..self.shared.peers.count() {
                        self.shared.peers.send(w, PeerMsg::Finish);
                    }
                }
            }
            Termination::Waves { .. } => self.set_idle(true),
        }
    }

    fn run(&mut self) -> Stop {
        loop {
            let step = if self.stack.is_empty() { self.find_work() } else { self.work() };
            if let Some(stop) = step {
                return stop;
            }
        }
    }

    /// Visits nodes until the next look at the inbox.
    fn work(&mut self) -> Option<Stop> {
        let n = self.shared.reserve(self.interval);
        if n == 0 {
            self.send_progress();
            return self.wait_at_limit();
        }
        let started = Instant::now();
        let done = match self.stack.work(n) {
            Ok(done) => done,
            Err(failure) => {
                self.send_progress();
                let _ = (self.report)(PollReport::Failed { worker: self.me, failure });
                return self.wait_for_coordinator();
            }
        };
        self.shared.unreserve(n - done);
        if self.stack.target_reached() {
            // The solution goes to the coordinator at once, which stops the run; the stack stays
            // for its checkpoint.
            self.send_progress();
            return self.wait_for_coordinator();
        }
        if done == n {
            // Adapt the interval to what a node costs.
            let per_node = started.elapsed().as_secs_f64() / done as f64;
            let ideal = (POLL_EVERY.as_secs_f64() / per_node.max(1e-9)) as u64;
            self.interval = ((self.interval * 3 + ideal.clamp(1, 1 << 16)) / 4).max(1);
        }
        if self.stack.is_empty() {
            self.send_progress();
            self.ran_dry();
        } else if self.last_report.elapsed() >= REPORT_EVERY {
            self.send_progress();
        }
        loop {
            match self.inbox.try_recv() {
                Ok(m) => {
                    if let Some(stop) = self.handle(m) {
                        return Some(stop);
                    }
                }
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => return Some(Stop::Gone),
            }
        }
    }

    /// The node limit is taken: waits for the coordinator to pause the run. Nodes another worker
    /// reserved but did not visit come back to the limit, so it looks again every millisecond:
    /// the run may need this worker's nodes to reach its limit.
    fn wait_at_limit(&mut self) -> Option<Stop> {
        loop {
            match self.inbox.recv_timeout(Duration::from_millis(1)) {
                Ok(m) => {
                    if let Some(stop) = self.handle(m) {
                        return Some(stop);
                    }
                    if self.stack.is_empty() {
                        return None;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Some(Stop::Gone),
            }
            if self.shared.remaining.load(Ordering::Relaxed) > 0 {
                return None;
            }
        }
    }

    /// Asks random workers until one gives work (or the run ends).
    fn find_work(&mut self) -> Option<Stop> {
        let mut pause = Duration::from_micros(20);
        loop {
            let rng = &mut self.rng;
            if let Some(victim) = self.shared.peers.victim(self.me, &mut |n| rng.below(n as usize) as u32) {
                self.shared.peers.send(victim, PeerMsg::Request { from: self.me, epoch: self.epoch });
            }
            // Wait for the answer; meanwhile answer others (with nothing) and obey the coordinator.
            loop {
                let message = match self.inbox.recv_timeout(ANSWER_WAIT) {
                    Ok(m) => m,
                    // The request or its answer went with a broken connection: ask again.
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return Some(Stop::Gone),
                };
                match message {
                    PeerMsg::NoWork { epoch } if epoch == self.epoch => break,
                    m => {
                        if let Some(stop) = self.handle(m) {
                            return Some(stop);
                        }
                        if !self.stack.is_empty() {
                            return None;
                        }
                        if std::mem::take(&mut self.resumed) {
                            // The answer to the request was taken during a pause: ask again.
                            break;
                        }
                    }
                }
            }
            // Nobody had work to spare: wait a little before asking again, listening all along.
            match self.inbox.recv_timeout(pause) {
                Ok(m) => {
                    if let Some(stop) = self.handle(m) {
                        return Some(stop);
                    }
                    if !self.stack.is_empty() {
                        return None;
                    }
                    self.resumed = false;
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Some(Stop::Gone),
            }
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    /// Handles a message (not the answer `NoWork` to this worker's own request).
    fn handle(&mut self, message: PeerMsg) -> Option<Stop> {
        match message {
            PeerMsg::Request { from, epoch } if epoch == self.epoch => {
                let loot = self.stack.split(self.shared.rule);
                let answer = if loot.is_empty() {
                    PeerMsg::NoWork { epoch }
                } else {
                    // The loot is counted before it travels, so that the count never reaches zero
                    // while it does.
                    if let Termination::Counter(busy) = &self.shared.termination {
                        busy.fetch_add(1, Ordering::SeqCst);
                    }
                    self.sent += 1;
                    if let Some(c) = self.shared.termination.counts(self.me) {
                        c.sent.store(self.sent, Ordering::SeqCst);
                    }
                    PeerMsg::Work { nodes: loot, epoch, pauses: self.pauses }
                };
                self.shared.peers.send(from, answer);
                None
            }
            PeerMsg::Request { from, epoch } => {
                // A request of another epoch (its sender was reset first): nothing to give it.
                self.shared.peers.send(from, PeerMsg::NoWork { epoch });
                None
            }
            PeerMsg::Work { nodes, epoch, .. } if epoch == self.epoch => {
                self.take_work(&nodes);
                self.accept(nodes)
            }
            PeerMsg::Pause { number } => self.pause(number),
            PeerMsg::Reset { epoch } => self.reset(epoch),
            PeerMsg::Finish => Some(Stop::Finish),
            PeerMsg::Incumbent(incumbent) => {
                self.stack.raise(incumbent);
                None
            }
            // Answers to old requests, messages of earlier epochs, starts already done.
            _ => None,
        }
    }

    /// Counts a piece of work taken from the inbox.
    fn take_work(&mut self, nodes: &[Returned]) {
        self.received += 1;
        self.pieces += 1;
        self.moved += nodes.len() as u64;
        match &self.shared.termination {
            // The piece was counted by its sender: inherit that count, or give it back if this
            // worker is counted already (it cannot reach zero: this worker's count remains).
            Termination::Counter(busy) => {
                if std::mem::replace(&mut self.counted, true) {
                    busy.fetch_sub(1, Ordering::SeqCst);
                }
            }
            Termination::Waves { .. } => {
                if let Some(c) = self.shared.termination.counts(self.me) {
                    c.idle.store(false, Ordering::SeqCst);
                    c.received.store(self.received, Ordering::SeqCst);
                }
            }
        }
    }

    fn accept(&mut self, nodes: Vec<Returned>) -> Option<Stop> {
        let empty = nodes.is_empty();
        if let Err(e) = self.stack.push(nodes) {
            let failure = JobFailure::new(JobId(0), "(received work)", e);
            let _ = (self.report)(PollReport::Failed { worker: self.me, failure });
            return self.wait_for_coordinator();
        }
        if !empty {
            self.set_idle(false);
        }
        None
    }

    fn send_progress(&mut self) {
        let progress = self.stack.take_progress();
        if progress.visited > 0 || !progress.output.is_empty() || !progress.solutions.is_empty() {
            let _ = (self.report)(PollReport::Progress { worker: self.me, progress });
        }
        self.last_report = Instant::now();
    }

    /// Blocks until the coordinator says what to do, answering requests with nothing.
    fn wait_for_coordinator(&mut self) -> Option<Stop> {
        loop {
            match self.inbox.recv() {
                Ok(PeerMsg::Request { from, epoch }) => self.shared.peers.send(from, PeerMsg::NoWork { epoch }),
                Ok(PeerMsg::Work { nodes, epoch, .. }) if epoch == self.epoch => {
                    self.take_work(&nodes);
                    let _ = self.stack.push(nodes);
                }
                Ok(PeerMsg::Pause { number }) => return self.pause(number),
                Ok(PeerMsg::Reset { epoch }) => return self.reset(epoch),
                Ok(PeerMsg::Start { root, index, of, epoch }) => {
                    self.enter(epoch);
                    let begun = selective_start(&mut *self.stack, root, index, of, self.shared.rule);
                    self.started(begun);
                    self.obeyed();
                    return None;
                }
                Ok(PeerMsg::Resume { nodes, epoch }) => {
                    self.resume(nodes, epoch);
                    return None;
                }
                Ok(PeerMsg::Finish) => return Some(Stop::Finish),
                Ok(PeerMsg::Incumbent(incumbent)) => self.stack.raise(incumbent),
                Ok(_) => {}
                Err(_) => return Some(Stop::Gone),
            }
        }
    }

    /// Hands everything to the coordinator for pause `number` and waits to be resumed or finished.
    fn pause(&mut self, number: u64) -> Option<Stop> {
        self.pauses = number;
        let progress = self.stack.take_progress();
        let stack = self.stack.take_all();
        let (pieces, moved) = (std::mem::take(&mut self.pieces), std::mem::take(&mut self.moved));
        let (sent, received) = (self.sent, self.received);
        let paused = PollReport::Paused { worker: self.me, stack, progress, sent, received, pieces, moved };
        if !(self.report)(paused) {
            return Some(Stop::Gone);
        }
        // Work from victims that have resumed already: this worker's once it resumes.
        let mut kept = Vec::new();
        loop {
            match self.inbox.recv() {
                Ok(PeerMsg::Request { from, epoch }) => self.shared.peers.send(from, PeerMsg::NoWork { epoch }),
                Ok(PeerMsg::Work { nodes, epoch, pauses }) if epoch == self.epoch => {
                    self.take_work(&nodes);
                    if pauses >= number {
                        kept.extend(nodes);
                    } else {
                        let _ = (self.report)(PollReport::LateWork { worker: self.me, nodes });
                    }
                }
                Ok(PeerMsg::Resume { mut nodes, epoch }) => {
                    nodes.append(&mut kept);
                    self.resume(nodes, epoch);
                    return None;
                }
                Ok(PeerMsg::Reset { epoch }) => return self.reset(epoch),
                Ok(PeerMsg::Finish) => return Some(Stop::Finish),
                Ok(PeerMsg::Incumbent(incumbent)) => self.stack.raise(incumbent),
                Ok(_) => {}
                Err(_) => return Some(Stop::Gone),
            }
        }
    }

    /// Obeys the coordinator's `Resume`: carries on in `epoch` with `nodes`.
    fn resume(&mut self, nodes: Vec<Returned>, epoch: u32) {
        self.enter(epoch);
        self.last_report = Instant::now();
        self.resumed = true;
        let begun = self.push(nodes);
        self.started(begun);
        self.obeyed();
    }

    /// Moves to `epoch` (a worker that joins after a rollback, or a reset): counts start again.
    fn enter(&mut self, epoch: u32) {
        if epoch == self.epoch {
            return;
        }
        self.epoch = epoch;
        self.sent = 0;
        self.received = 0;
        if let Some(c) = self.shared.termination.counts(self.me) {
            c.sent.store(0, Ordering::SeqCst);
            c.received.store(0, Ordering::SeqCst);
        }
    }

    /// A rollback: drops the stack and what it did since its last report, moves to `epoch`, and
    /// waits for the coordinator's `Resume`.
    fn reset(&mut self, epoch: u32) -> Option<Stop> {
        self.stack.take_all();
        let dropped = self.stack.take_progress();
        // Its solutions raised the incumbent this process's workers share: when the work is done
        // again, they would not be offered again.
        if !dropped.solutions.is_empty() {
            let progress = Progress { solutions: dropped.solutions, ..Progress::default() };
            let _ = (self.report)(PollReport::Progress { worker: self.me, progress });
        }
        // The steals of the epoch rolled back go with it, as the coordinator's totals do.
        (self.pieces, self.moved) = (0, 0);
        self.enter(epoch);
        self.set_idle(true);
        if !(self.report)(PollReport::ResetDone { worker: self.me, epoch }) {
            return Some(Stop::Gone);
        }
        self.resumed = true;
        self.wait_for_coordinator()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RunnerSettings, Searcher, TreeSearcher};

    /// A complete tree of branching `b` and height `h`, nodes numbered in heap order, each a record.
    struct Complete {
        b: u64,
        h: u32,
    }

    impl crate::Tree for Complete {
        type Node = u64;
        type Children<'a> = Box<dyn Iterator<Item = u64>>;
        fn root(&self) -> u64 {
            0
        }
        fn children<'a>(&'a self, node: &u64, depth: u32) -> Self::Children<'a> {
            let (b, v) = (self.b, *node);
            if depth < self.h { Box::new((1..=b).map(move |i| v * b + i)) } else { Box::new(std::iter::empty()) }
        }
        fn output(&self, node: &u64, _depth: u32, out: &mut String) -> bool {
            out.push_str(&node.to_string());
            true
        }
    }

    /// Every node a solution worth its number, nothing pruned.
    impl crate::Optimise for Complete {
        fn value(&self, node: &u64, _depth: u32) -> Option<i64> {
            Some(*node as i64)
        }
        fn bound(&self, _node: &u64, _depth: u32) -> i64 {
            i64::MAX
        }
    }

    /// A rollback drops the work done since the last report, but not its solutions: they raised
    /// the incumbent this process's workers share, so the work done again would not offer them.
    #[test]
    fn a_reset_drops_the_work_but_reports_its_solutions() {
        let searcher = TreeSearcher::optimising(Complete { b: 2, h: 10 });
        let root = Returned { depth: 0, node: searcher.root().unwrap() };
        let stack = searcher.stack_worker(RunnerSettings::default()).unwrap();
        let (tx, inbox) = std::sync::mpsc::channel();
        // Waiting when the worker first looks, after its first few nodes.
        tx.send(PeerMsg::Reset { epoch: 1 }).unwrap();
        let shared = Arc::new(Shared {
            peers: Box::new(vec![tx.clone()]),
            termination: Termination::Counter(AtomicUsize::new(1)),
            remaining: AtomicU64::new(u64::MAX),
            rule: SplitRule::Alternate,
        });
        let (reports_tx, reports) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            let mut report = |r| reports_tx.send(r).is_ok();
            run_polling_worker(0, stack, Start::Nodes(vec![root]), inbox, shared, &mut report, 1).unwrap();
        });
        let mut solutions = Vec::new();
        loop {
            match reports.recv_timeout(Duration::from_secs(5)).expect("no ResetDone") {
                PollReport::Progress { progress, .. } => solutions.extend(progress.solutions),
                PollReport::ResetDone { epoch: 1, .. } => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert!(!solutions.is_empty(), "the solutions of the work dropped were not reported");
        tx.send(PeerMsg::Finish).unwrap();
        worker.join().unwrap();
    }

    /// A victim is any index of the ranges but the thief's own, each drawn by one number.
    #[test]
    fn a_victim_is_drawn_uniformly_among_the_others() {
        let all = |ranges: Vec<std::ops::Range<u32>>, me: u32| {
            let n = std::cell::Cell::new(0);
            let _ = pick(ranges.clone(), me, &mut |count| {
                n.set(count);
                0
            });
            (0..n.get()).map(|k| pick(ranges.clone(), me, &mut |_| k).unwrap()).collect::<Vec<u32>>()
        };
        assert_eq!(all(std::iter::once(0..4).collect(), 0), vec![1, 2, 3]);
        assert_eq!(all(std::iter::once(0..4).collect(), 2), vec![0, 1, 3]);
        assert_eq!(all(vec![0..2, 5..6, 9..12], 10), vec![0, 1, 5, 9, 11]);
        assert_eq!(all(vec![0..2, 9..12], 5), vec![0, 1, 9, 10, 11], "a thief not in the ranges");
        assert_eq!(pick(std::iter::once(3..4), 3, &mut |_| unreachable!("nobody to draw")), None);
        assert_eq!(pick(Vec::new(), 0, &mut |_| unreachable!("nobody to draw")), None);
    }

    /// Between processes a request can go with a broken connection: the thief, with no answer,
    /// asks again (it once waited for good, idle for the rest of the run).
    #[test]
    fn a_thief_whose_request_is_lost_asks_again() {
        struct Lossy {
            lost: std::sync::atomic::AtomicBool,
            victim: std::sync::Mutex<std::sync::mpsc::Sender<PeerMsg>>,
        }
        impl Peers for Lossy {
            fn count(&self) -> u32 {
                2
            }
            fn send(&self, _to: u32, message: PeerMsg) {
                if !self.lost.swap(true, Ordering::SeqCst) {
                    return;
                }
                let _ = self.victim.lock().unwrap().send(message);
            }
        }
        let searcher = TreeSearcher::new(Complete { b: 2, h: 2 });
        let stack = searcher.stack_worker(RunnerSettings::default()).unwrap();
        let (tx, inbox) = std::sync::mpsc::channel();
        let (victim, requests) = std::sync::mpsc::channel();
        let lossy = Lossy { lost: false.into(), victim: victim.into() };
        let shared = Arc::new(Shared {
            peers: Box::new(lossy),
            // The other worker is busy: the run goes on.
            termination: Termination::Counter(AtomicUsize::new(2)),
            remaining: AtomicU64::new(u64::MAX),
            rule: SplitRule::Alternate,
        });
        let worker = std::thread::spawn(move || {
            let mut report = |_| true;
            run_polling_worker(0, stack, Start::Nodes(Vec::new()), inbox, shared, &mut report, 1).unwrap();
        });
        let again = requests.recv_timeout(Duration::from_secs(10)).expect("the thief did not ask again");
        assert!(matches!(again, PeerMsg::Request { from: 0, .. }), "{again:?}");
        tx.send(PeerMsg::Finish).unwrap();
        worker.join().unwrap();
    }

    /// A worker that finds the node limit taken carries on once nodes come back to it (another
    /// worker reserved more than it could visit), instead of waiting for a pause that the run,
    /// short of its limit, never asks for.
    #[test]
    fn a_worker_at_the_node_limit_carries_on_when_nodes_come_back() {
        let searcher = TreeSearcher::new(Complete { b: 2, h: 2 });
        let root = Returned { depth: 0, node: searcher.root().unwrap() };
        let stack = searcher.stack_worker(RunnerSettings::default()).unwrap();
        let (tx, inbox) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared {
            peers: Box::new(vec![tx]),
            termination: Termination::Counter(AtomicUsize::new(1)),
            remaining: AtomicU64::new(0),
            rule: SplitRule::Alternate,
        });
        let (reports_tx, reports) = std::sync::mpsc::channel();
        let worker = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                let mut report = |r| reports_tx.send(r).is_ok();
                run_polling_worker(0, stack, Start::Nodes(vec![root]), inbox, shared, &mut report, 1).unwrap();
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        // Another worker gives back the nodes it reserved.
        shared.remaining.store(7, Ordering::Relaxed);
        let mut visited = 0;
        while let Ok(r) = reports.recv_timeout(Duration::from_secs(5)) {
            match r {
                PollReport::Progress { progress, .. } => visited += progress.visited,
                PollReport::Finished { progress, .. } => {
                    visited += progress.visited;
                    break;
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(visited, 7, "the worker did not carry on");
        worker.join().unwrap();
    }

    /// Every worker's selective start, then every stack worked to the end: each node is counted
    /// (and written) exactly once, by one worker.
    #[test]
    fn selective_start_shares_the_root_without_counting_twice() {
        for (b, h) in [(2u64, 0u32), (2, 1), (3, 4), (1, 6)] {
            let size: u64 = (0..=h).map(|d| b.pow(d)).sum();
            for workers in 1..=9u32 {
                for rule in [SplitRule::Alternate, SplitRule::Bottom] {
                    let searcher = TreeSearcher::new(Complete { b, h });
                    let root = Returned { depth: 0, node: searcher.root().unwrap() };
                    let mut seen = std::collections::HashMap::<u64, u32>::new();
                    let mut nonempty = 0;
                    for me in 0..workers {
                        let mut stack = searcher.stack_worker(RunnerSettings::default()).unwrap();
                        let start = selective_start(&mut *stack, root.clone(), me, workers, rule).unwrap();
                        nonempty += u32::from(!stack.is_empty());
                        stack.work(u64::MAX).unwrap();
                        let mut p = start;
                        p.merge(stack.take_progress());
                        for line in String::from_utf8(p.output).unwrap().lines() {
                            *seen.entry(line.parse().unwrap()).or_default() += 1;
                        }
                    }
                    assert_eq!(seen.len() as u64, size, "b={b} h={h} P={workers} {rule:?}");
                    assert!(seen.values().all(|&c| c == 1), "b={b} h={h} P={workers} {rule:?}: {seen:?}");
                    if (b, h) == (3, 4) {
                        assert_eq!(nonempty, workers, "P={workers} {rule:?}: every worker starts with work");
                    }
                }
            }
        }
    }
}
