//! Random polling (Sanders): every worker owns a depth-first stack; a worker that runs dry asks a
//! uniformly random other worker for work, and the busy one splits its stack and sends part of it.
//! No central job list: the coordinator only starts the run, commits what workers report, pauses
//! them for checkpoints and ends the run.
//!
//! # Termination
//! `Shared::busy` counts the workers whose stack is not empty plus the work messages in flight. A
//! victim counts a piece of work before sending it, the thief inherits that count, and a worker
//! takes itself off only when its stack runs dry. The count therefore reaches zero exactly when no
//! stack holds a node and no node travels, and it cannot rise again from zero (only a worker with
//! work can give work): the worker that brings it to zero tells everyone the run is over.
//!
//! # Pausing
//! On `Pause` a worker hands its stack, its progress and its counts of work messages sent and
//! received to the coordinator, then answers every request with `NoWork` and forwards any work that
//! still reaches it (sent before the victim paused). Once every worker has paused, no work message
//! can be sent any more; when the received counts catch up with the sent ones, the coordinator
//! holds every unvisited node: a consistent snapshot.

use crate::StackWorker;
use crate::estimate::SplitMix64;
use bts_protocol::polling::{PeerMsg, PollReport, Progress, SplitRule};
use bts_protocol::{JobFailure, Returned};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::time::{Duration, Instant};

/// What the workers of a run share.
pub struct Shared {
    /// Workers with a non-empty stack plus work messages in flight.
    pub busy: AtomicUsize,
    /// Every worker's inbox, by index.
    pub inboxes: Vec<Sender<PeerMsg>>,
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

    fn finish_all(&self) {
        for inbox in &self.inboxes {
            let _ = inbox.send(PeerMsg::Finish);
        }
    }
}

/// Busy workers look at their inbox about this often, whatever a node costs (Sanders: the polling
/// interval Δt should make polling a small share ε of the work; an empty inbox costs a few
/// nanoseconds to look at, so checking every 20 µs costs well under 1%).
const POLL_EVERY: Duration = Duration::from_micros(20);
/// Progress goes to the coordinator about this often.
const REPORT_EVERY: Duration = Duration::from_millis(2);

struct Worker<'a> {
    me: u32,
    stack: Box<dyn StackWorker>,
    inbox: Receiver<PeerMsg>,
    shared: Arc<Shared>,
    report: &'a mut dyn FnMut(PollReport) -> bool,
    rng: SplitMix64,
    sent: u64,
    received: u64,
    pieces: u64,
    moved: u64,
    /// Nodes visited between looks at the inbox.
    interval: u64,
    last_report: Instant,
    /// A pause happened: any answer to an earlier request went to the coordinator.
    resumed: bool,
}

/// Why the worker loop ends.
enum Stop {
    Finish,
    /// The coordinator is gone.
    Gone,
}

/// How a worker gets its first work.
pub enum Start {
    /// A new run: Sanders' selective initialisation. Every worker takes the root and splits it
    /// ⌈log2 P⌉ times following the bits of its index, keeping its own part (see [`selective_start`]).
    Selective(Returned),
    /// A new run: worker 0 takes the root, the others start by stealing.
    Plain(Returned),
    /// These nodes (a resumed run).
    Nodes(Vec<Returned>),
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
    let undecodable = |e| JobFailure { id: bts_protocol::JobId(0), node: "(the root)".into(), message: e };
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
            stack.work(1)?;
            let p = stack.take_progress();
            if leader {
                counted.merge(p);
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

/// Runs worker `me` until the run ends. Every worker must be counted in `shared.busy` before any
/// starts; a worker that starts with nothing takes itself off.
pub fn run_polling_worker(
    me: u32,
    mut stack: Box<dyn StackWorker>,
    start: Start,
    inbox: Receiver<PeerMsg>,
    shared: Arc<Shared>,
    report: &mut dyn FnMut(PollReport) -> bool,
    seed: u64,
) {
    let workers = shared.inboxes.len() as u32;
    let push = |stack: &mut dyn StackWorker, nodes| {
        stack.push(nodes).map(|_| Progress::default()).map_err(|message| JobFailure {
            id: bts_protocol::JobId(0),
            node: "(a starting node)".into(),
            message,
        })
    };
    let begun = match start {
        Start::Selective(root) => selective_start(&mut *stack, root, me, workers, shared.rule),
        Start::Plain(root) => push(&mut *stack, if me == 0 { vec![root] } else { Vec::new() }),
        Start::Nodes(nodes) => push(&mut *stack, nodes),
    };
    match begun {
        Ok(progress) if progress.visited > 0 => {
            let _ = report(PollReport::Progress { worker: me, progress });
        }
        Ok(_) => {}
        Err(failure) => {
            let _ = report(PollReport::Failed { worker: me, failure });
        }
    }
    if stack.is_empty() && shared.busy.fetch_sub(1, Ordering::SeqCst) == 1 {
        shared.finish_all();
    }
    let mut w = Worker {
        me,
        stack,
        inbox,
        shared,
        report,
        rng: SplitMix64::new(seed ^ (me as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        sent: 0,
        received: 0,
        pieces: 0,
        moved: 0,
        interval: 16,
        last_report: Instant::now(),
        resumed: false,
    };
    if let Stop::Finish = w.run() {
        let progress = w.stack.take_progress();
        let (pieces, moved) = (w.pieces, w.moved);
        let _ = (w.report)(PollReport::Finished { worker: me, progress, pieces, moved });
    }
}

impl Worker<'_> {
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
            // The node limit is reached: wait for the coordinator to pause the run.
            self.send_progress();
            return self.wait_for_coordinator();
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
        if done == n {
            // Adapt the interval to what a node costs.
            let per_node = started.elapsed().as_secs_f64() / done as f64;
            let ideal = (POLL_EVERY.as_secs_f64() / per_node.max(1e-9)) as u64;
            self.interval = ((self.interval * 3 + ideal.clamp(1, 1 << 16)) / 4).max(1);
        }
        if self.stack.is_empty() {
            self.send_progress();
            if self.shared.busy.fetch_sub(1, Ordering::SeqCst) == 1 {
                self.shared.finish_all();
            }
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

    /// Asks random workers until one gives work (or the run ends).
    fn find_work(&mut self) -> Option<Stop> {
        let others = self.shared.inboxes.len() - 1;
        let mut pause = Duration::from_micros(20);
        loop {
            if others > 0 {
                let victim = (self.me as usize + 1 + self.rng.below(others)) % (others + 1);
                let _ = self.shared.inboxes[victim].send(PeerMsg::Request { from: self.me });
            }
            // Wait for the answer; meanwhile answer others (with nothing) and obey the coordinator.
            loop {
                let message = match self.inbox.recv() {
                    Ok(m) => m,
                    Err(_) => return Some(Stop::Gone),
                };
                match message {
                    PeerMsg::NoWork => break,
                    m => {
                        if let Some(stop) = self.handle(m) {
                            return Some(stop);
                        }
                        if !self.stack.is_empty() {
                            return None;
                        }
                        if std::mem::take(&mut self.resumed) {
                            // The answer to the request was taken during the pause: ask again.
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
            PeerMsg::Request { from } => {
                let loot = self.stack.split(self.shared.rule);
                let answer = if loot.is_empty() {
                    PeerMsg::NoWork
                } else {
                    // The loot is counted before it travels, so that the count never reaches zero
                    // while it does.
                    self.shared.busy.fetch_add(1, Ordering::SeqCst);
                    self.sent += 1;
                    PeerMsg::Work(loot)
                };
                let _ = self.shared.inboxes[from as usize].send(answer);
                None
            }
            PeerMsg::Work(nodes) => {
                self.received += 1;
                self.pieces += 1;
                self.moved += nodes.len() as u64;
                self.accept(nodes)
            }
            PeerMsg::NoWork | PeerMsg::Resume(_) => None,
            PeerMsg::Pause => self.pause(),
            PeerMsg::Finish => Some(Stop::Finish),
        }
    }

    fn accept(&mut self, nodes: Vec<Returned>) -> Option<Stop> {
        if let Err(e) = self.stack.push(nodes) {
            let failure = JobFailure { id: bts_protocol::JobId(0), node: "(received work)".into(), message: e };
            let _ = (self.report)(PollReport::Failed { worker: self.me, failure });
            return self.wait_for_coordinator();
        }
        None
    }

    fn send_progress(&mut self) {
        let progress = self.stack.take_progress();
        if progress.visited > 0 || !progress.output.is_empty() {
            let _ = (self.report)(PollReport::Progress { worker: self.me, progress });
        }
        self.last_report = Instant::now();
    }

    /// Blocks until the coordinator pauses or ends the run, answering requests with nothing.
    fn wait_for_coordinator(&mut self) -> Option<Stop> {
        loop {
            match self.inbox.recv() {
                Ok(PeerMsg::Request { from }) => {
                    let _ = self.shared.inboxes[from as usize].send(PeerMsg::NoWork);
                }
                Ok(PeerMsg::Work(nodes)) => {
                    self.received += 1;
                    self.pieces += 1;
                    self.moved += nodes.len() as u64;
                    let _ = self.stack.push(nodes);
                }
                Ok(PeerMsg::Pause) => return self.pause(),
                Ok(PeerMsg::Finish) => return Some(Stop::Finish),
                Ok(_) => {}
                Err(_) => return Some(Stop::Gone),
            }
        }
    }

    /// Hands everything to the coordinator and waits to be resumed or finished.
    fn pause(&mut self) -> Option<Stop> {
        let progress = self.stack.take_progress();
        let stack = self.stack.take_all();
        let paused = PollReport::Paused { worker: self.me, stack, progress, sent: self.sent, received: self.received };
        if !(self.report)(paused) {
            return Some(Stop::Gone);
        }
        loop {
            match self.inbox.recv() {
                Ok(PeerMsg::Request { from }) => {
                    let _ = self.shared.inboxes[from as usize].send(PeerMsg::NoWork);
                }
                Ok(PeerMsg::Work(nodes)) => {
                    self.received += 1;
                    self.pieces += 1;
                    self.moved += nodes.len() as u64;
                    let _ = (self.report)(PollReport::LateWork { worker: self.me, nodes });
                }
                Ok(PeerMsg::Resume(nodes)) => {
                    self.last_report = Instant::now();
                    self.resumed = true;
                    return self.accept(nodes);
                }
                Ok(PeerMsg::Finish) => return Some(Stop::Finish),
                Ok(PeerMsg::NoWork | PeerMsg::Pause) => {}
                Err(_) => return Some(Stop::Gone),
            }
        }
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
