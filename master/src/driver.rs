//! The driver: moves messages between the [`Scheduler`] and the workers' channels, writes committed
//! output, takes checkpoints, and watches the clock and the stop file. All I/O of the master
//! happens here.

use crate::polling::{Coordinator, PauseFor};
use crate::scheduler::{Outcome, Place, Scheduler, StopReason, WorkerId};
use crate::view::RunView;
use bts_protocol::polling::{Counts, PeerMsg, PollReport};
use bts_protocol::{FromWorker, JobFailure, ToWorker};
use bts_protocol::{MasterFrame, PeerEntry};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How the master reaches one worker.
pub trait Link: Send {
    /// Delivers a message; false if the worker is gone. A link whose worker is gone sends
    /// [`Event::Disconnected`] or [`Event::Left`] after the worker's last message.
    fn send(&self, message: ToWorker) -> bool;

    /// Cuts the worker off (it broke the protocol).
    fn close(&self) {}
}

/// A local worker thread's inbox.
impl Link for Sender<ToWorker> {
    fn send(&self, message: ToWorker) -> bool {
        Sender::send(self, message).is_ok()
    }
}

/// How the master reaches a remote process of a random-polling run.
pub trait ProcessLink: Send {
    fn send(&self, frame: MasterFrame) -> bool;
}

/// What reaches the master, from whatever carries it.
pub enum Event {
    /// A worker is ready; the master sends it messages through `link`.
    Joined {
        worker: WorkerId,
        threads: u32,
        /// Where it runs: a job that fails in one place is tried in another.
        place: Place,
        link: Box<dyn Link>,
    },
    /// The measured round trip to a worker.
    Latency {
        worker: WorkerId,
        rtt: Duration,
    },
    Message(WorkerId, FromWorker),
    /// The worker's connection or thread is gone.
    Disconnected(WorkerId),
    /// A remote worker left the run when told to stop, after the reports of the jobs it ran.
    Left(WorkerId),
    /// Stop the run once the jobs out with workers are back (a signal, ...).
    Stop(StopReason),
    /// Stop now: save what is committed and leave the jobs out with workers to the checkpoint.
    Abort(StopReason),
    /// A worker thread died (a panic outside any job, such as a node that does not serialise when
    /// random polling hands it on): the run fails at once. Its nodes are lost with it, so nothing
    /// is saved: the last checkpoint stays the run's.
    Died(JobFailure),
    /// A report of a random-polling worker.
    Poll(PollReport),
    /// A remote process of a random-polling run is ready: `threads` workers, reached by other
    /// processes at `peer_address`.
    ProcessJoined {
        process: u64,
        threads: u32,
        peer_address: Option<String>,
        link: Box<dyn ProcessLink>,
    },
    /// A remote polling process is gone.
    ProcessLeft(u64),
    /// A remote polling process asks to leave the run (it was told to stop).
    ProcessLeaving(u64),
    /// A remote polling process's counts for a termination wave.
    Counts {
        process: u64,
        wave: u64,
        counts: Vec<Counts>,
    },
}

/// Where committed output records go.
pub trait Output: Write {
    /// Makes everything written so far durable (flush, and sync a file to disk).
    fn sync(&mut self) -> io::Result<()>;

    /// Cuts the output back to its first `len` bytes (a rollback), if it can be.
    fn rewind(&mut self, len: u64) -> io::Result<()> {
        let _ = len;
        Err(io::Error::new(io::ErrorKind::Unsupported, "this output cannot be cut back"))
    }

    /// A checksum of everything written so far (after [`sync`](Self::sync)), for checkpoints to
    /// record; `None` if this output keeps none.
    fn checksum(&self) -> Option<u32> {
        None
    }

    /// Writes out what is buffered and remembers where the output is, for a rollback to cut it
    /// back here without reading it again (a snapshot held in memory): less than a sync, which a
    /// checkpoint needs.
    fn mark(&mut self) -> io::Result<()> {
        self.flush()
    }
}

/// The moment at which the driver saves a run, for the checkpoint to record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SavePoint {
    /// [`Output::checksum`] of the output, which holds exactly the committed records.
    pub output_checksum: Option<u32>,
    /// The run's last save: nothing is written to the output after it.
    pub last: bool,
}

/// An output for records that are counted, not kept.
pub struct Discard;

impl Write for Discard {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Output for Discard {
    fn sync(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn rewind(&mut self, _len: u64) -> io::Result<()> {
        Ok(())
    }
}

/// An [`Output`] for writers that cannot be synced beyond a flush (stdout, memory, a sink).
pub struct Plain<W>(pub W);

impl<W: Write> Write for Plain<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

impl<W: Write> Output for Plain<W> {
    fn sync(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// Hooks of the driver into the rest of the program.
pub trait Observer {
    /// Called every [`DriveOptions::tick`], for progress reports.
    fn tick(&mut self, _run: &dyn RunView) {}

    /// Saves the run. Called every [`DriveOptions::checkpoint_every`] and when the run ends, at a
    /// consistent moment: the output holds exactly the committed records, synced.
    fn checkpoint(&mut self, _run: &dyn RunView, _at: SavePoint) -> io::Result<()> {
        Ok(())
    }

    /// Called once when the run starts to stop (told to: a signal, the time limit, the stop file;
    /// or by itself: the node limit, the target, a failed job), before it waits for the jobs out
    /// with workers.
    fn stopping(&mut self) {}

    /// Called once when the run ends (after the last checkpoint).
    fn finish(&mut self, _run: &dyn RunView) {}
}

impl Observer for () {}

#[derive(Clone, Debug, Default)]
pub struct DriveOptions {
    /// Stop when this moment passes.
    pub deadline: Option<Instant>,
    /// Stop when this file appears.
    pub stop_file: Option<PathBuf>,
    /// Save the run this often without stopping it.
    pub checkpoint_every: Option<Duration>,
    /// Random polling across processes: pause every worker this often for a snapshot held in
    /// memory, the point a lost process or work message takes the run back to (none while no
    /// process has joined). Stretched so that pausing takes at most 1/50 of the run.
    pub snapshot_every: Option<Duration>,
    /// Save the run as soon as it is told to stop (a signal, the time limit, the stop file), before
    /// the jobs out with workers come back: a stop is often followed by a kill (a batch system's
    /// grace period; `mpirun` kills every rank a second after it passes Ctrl-C on as SIGTERM).
    /// Budget mode only: a polling run stops by pausing its workers, which is how it saves.
    pub save_on_stop: bool,
    /// More workers may join later (a listening master); otherwise losing every worker ends the run.
    pub workers_may_join: bool,
    /// Call [`Observer::tick`] this often.
    pub tick: Option<Duration>,
}

/// How often the stop file is looked for.
const STOP_FILE_POLL: Duration = Duration::from_millis(100);

/// The driver's timers.
struct Timers {
    /// The time limit, until it has stopped the run (a past deadline left here would wake the
    /// driver at once, again and again, while the jobs out come back).
    deadline: Option<Instant>,
    tick: Option<Instant>,
    checkpoint: Option<Instant>,
    stop_file: Option<Instant>,
    failed_saves: FailedSaves,
    snapshots: Snapshots,
}

/// A snapshot pause is stretched to come no sooner than this many times its last one's length
/// after it: on a large or slow cluster pausing for snapshots costs at most 1/50 of the run.
const SNAPSHOT_COST_SHARE: u32 = 50;

/// When the next snapshot pause is due (random polling across processes).
#[derive(Default)]
struct Snapshots {
    next: Option<Instant>,
    /// When the pause under way was asked for.
    asked: Option<Instant>,
    /// How long the last pause asked for took.
    took: Duration,
}

impl Snapshots {
    fn due(&self, now: Instant) -> bool {
        self.asked.is_none() && self.next.is_some_and(|at| now >= at)
    }

    fn asked(&mut self, now: Instant) {
        self.asked = Some(now);
    }

    /// A pause completed at `now` (a snapshot's, a checkpoint's, a leave's: each takes a snapshot),
    /// or a rollback (`paused` false): the next snapshot is due a while after.
    fn taken(&mut self, options: &DriveOptions, now: Instant, paused: bool) {
        let Some(every) = options.snapshot_every else { return };
        if let Some(asked) = self.asked.take().filter(|_| paused) {
            self.took = now.duration_since(asked);
        }
        self.next = Some(now + every.max(self.took * SNAPSHOT_COST_SHARE));
    }
}

/// Periodic checkpoints that could not be written: warned of at the first, then once a minute
/// (every few seconds, they would fill the log), and told when they work again.
#[derive(Default)]
struct FailedSaves {
    since: Option<Instant>,
    warned: Option<Instant>,
}

/// How often failing periodic checkpoints are warned of.
const WARN_EVERY: Duration = Duration::from_secs(60);

impl FailedSaves {
    /// A save failed at `now`: true if it is warned of.
    fn failed(&mut self, what: &str, e: &io::Error, now: Instant) -> bool {
        let since = *self.since.get_or_insert(now);
        if self.warned.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
            tracing::debug!("cannot write {what}: {e}");
            return false;
        }
        self.warned = Some(now);
        let how_long = match now.duration_since(since).as_secs() {
            0 => String::new(),
            s => format!(" (none written for {s} s)"),
        };
        tracing::warn!("cannot write {what}: {e}{how_long}");
        true
    }

    fn saved(&mut self) {
        if let Some(since) = self.since.take() {
            tracing::warn!("a checkpoint is written again, after {} s without", since.elapsed().as_secs());
        }
        self.warned = None;
    }
}

/// What the timers say is due.
struct Due {
    tick: bool,
    checkpoint: bool,
    stop: Option<StopReason>,
}

impl Timers {
    fn new(options: &DriveOptions, now: Instant) -> Self {
        Timers {
            deadline: options.deadline,
            tick: options.tick.map(|t| now + t),
            checkpoint: options.checkpoint_every.map(|t| now + t),
            stop_file: options.stop_file.as_ref().map(|_| now),
            failed_saves: FailedSaves::default(),
            snapshots: Snapshots { next: options.snapshot_every.map(|t| now + t), ..Snapshots::default() },
        }
    }

    /// What is due at `now`. Rearms the tick; the caller rearms the checkpoint when it has acted.
    fn due(&mut self, options: &DriveOptions, now: Instant) -> Due {
        let tick = self.tick.is_some_and(|at| now >= at);
        if tick {
            self.tick = options.tick.map(|t| now + t);
        }
        let mut stop = None;
        if self.stop_file.is_some_and(|at| now >= at) {
            if let Some(file) = options.stop_file.as_ref().filter(|f| f.exists()) {
                tracing::warn!(
                    "the stop file {} appeared: stopping once the workers hand their work back",
                    file.display()
                );
                stop = Some(StopReason::StopFile);
                self.stop_file = None;
            } else {
                self.stop_file = Some(now + STOP_FILE_POLL);
            }
        }
        if self.deadline.is_some_and(|d| now >= d) {
            stop.get_or_insert(StopReason::TimeLimit);
            self.deadline = None;
        }
        Due { tick, checkpoint: self.checkpoint.is_some_and(|at| now >= at), stop }
    }

    fn rearm_checkpoint(&mut self, options: &DriveOptions, from: Instant) {
        self.checkpoint = options.checkpoint_every.map(|t| from + t);
    }

    /// When the next timer fires, or `other`.
    fn wake(&self, other: Option<Instant>) -> Option<Instant> {
        let snapshot = self.snapshots.next.filter(|_| self.snapshots.asked.is_none());
        [self.deadline, self.tick, self.checkpoint, self.stop_file, snapshot, other].into_iter().flatten().min()
    }
}

/// The next event, waiting at most until `wake` (`None`: the time came first).
fn next_event(events: &Receiver<Event>, wake: Option<Instant>, now: Instant) -> io::Result<Option<Event>> {
    let closed = || io::Error::other("every event source closed");
    match wake {
        Some(at) => match events.recv_timeout(at.saturating_duration_since(now)) {
            Ok(e) => Ok(Some(e)),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(closed()),
        },
        None => events.recv().map(Some).map_err(|_| closed()),
    }
}

/// Runs the scheduler until the run ends, then takes the final checkpoint. Returns how the run
/// ended; with [`Event::Abort`] that is before the jobs out with workers came back.
pub fn drive(
    scheduler: &mut Scheduler,
    events: &Receiver<Event>,
    output: &mut dyn Output,
    options: &DriveOptions,
    observer: &mut dyn Observer,
) -> io::Result<Outcome> {
    let mut links: HashMap<WorkerId, Box<dyn Link>> = HashMap::new();
    let mut timers = Timers::new(options, Instant::now());
    let mut had_workers = false;
    // What came before the run started (the local threads joining) is taken in before the run
    // can end: a resumed complete run ends at once, and its summary counts its workers.
    let mut early: VecDeque<Event> = events.try_iter().collect();
    let mut told_stopping = false;
    loop {
        if scheduler.stopping() && !std::mem::replace(&mut told_stopping, true) {
            observer.stopping();
        }
        while let Some((worker, message)) = scheduler.poll_send() {
            let delivered = links.get(&worker).is_some_and(|link| link.send(message));
            if !delivered {
                // Its connection or thread has ended, and says so by an event (`Disconnected` or
                // `Left`) behind whatever it reported before: that event hands its jobs back.
                // Handled now, it took those last reports for a stranger's, and a worker that left
                // as asked for a lost one.
                links.remove(&worker);
            }
        }
        write_out(scheduler, output)?;
        if let Some(outcome) = scheduler.outcome().filter(|_| early.is_empty()) {
            let outcome = outcome.clone();
            let best_due = scheduler.best_due();
            save_at_the_end(scheduler, best_due, output, observer, |s, output| {
                s.write_best();
                write_out(s, output)
            })?;
            observer.finish(scheduler);
            return Ok(outcome);
        }
        if had_workers && scheduler.workers() == 0 && !options.workers_may_join {
            scheduler.stop(StopReason::NoWorkers);
            continue;
        }

        let now = Instant::now();
        let due = timers.due(options, now);
        if due.tick {
            observer.tick(scheduler);
            scheduler.clear_job_sizes();
        }
        if due.checkpoint {
            save_on_the_way(scheduler, output, observer, "a periodic checkpoint", &mut timers.failed_saves)?;
            timers.rearm_checkpoint(options, Instant::now());
        }
        if let Some(reason) = due.stop {
            stop(scheduler, reason, output, observer, options)?;
            // The workers and the searcher hear of it at the top of the loop, not after the next
            // event (with long jobs out, the next tick: up to 250 ms late).
            continue;
        }

        let event = match early.pop_front() {
            Some(event) => event,
            None => match next_event(events, timers.wake(None), now)? {
                Some(event) => event,
                None => continue,
            },
        };
        match event {
            Event::Joined { worker, threads, place, link } => {
                had_workers = true;
                links.insert(worker, link);
                scheduler.add_worker_at(worker, threads, place);
            }
            Event::Message(worker, message) => {
                if let Err(violation) = scheduler.handle_message(worker, message) {
                    tracing::warn!("{violation}; dropping the worker");
                    if let Some(link) = links.remove(&worker) {
                        link.close();
                    }
                    scheduler.handle_disconnect(worker);
                }
            }
            Event::Latency { worker, rtt } => scheduler.set_latency(worker, rtt),
            Event::Disconnected(worker) => {
                links.remove(&worker);
                scheduler.handle_disconnect(worker);
            }
            Event::Left(worker) => {
                links.remove(&worker);
                scheduler.handle_leave(worker);
            }
            Event::Stop(reason) => stop(scheduler, reason, output, observer, options)?,
            Event::Poll(_)
            | Event::ProcessJoined { .. }
            | Event::ProcessLeft(_)
            | Event::ProcessLeaving(_)
            | Event::Counts { .. } => {}
            Event::Abort(reason) => {
                save(scheduler, output, observer, true)?;
                observer.finish(scheduler);
                return Ok(Outcome::Stopped(reason));
            }
            Event::Died(failure) => {
                output.flush()?;
                observer.finish(scheduler);
                return Ok(Outcome::Failed(failure));
            }
        }
    }
}

/// Tells the run to stop; the first time, with [`DriveOptions::save_on_stop`], saves it at once as
/// a periodic checkpoint does (the jobs out with workers by their start nodes), so that a kill
/// before they come back loses only their progress.
fn stop(
    scheduler: &mut Scheduler,
    reason: StopReason,
    output: &mut dyn Output,
    observer: &mut dyn Observer,
    options: &DriveOptions,
) -> io::Result<()> {
    let first = !scheduler.stopping();
    scheduler.stop(reason);
    if first
        && options.save_on_stop
        && scheduler.outcome().is_none()
        && save_on_the_way(scheduler, output, observer, "the checkpoint as the run stops", &mut FailedSaves::default())?
    {
        tracing::info!("saved the run; waiting for the jobs out with workers");
    }
    Ok(())
}

/// Saves a run that goes on (a periodic checkpoint, or one as it starts to stop); true if saved.
/// A checkpoint that cannot be written leaves the previous one valid, and only `what` is
/// warned of; an output that cannot be synced fails the run, as one that cannot be written does:
/// what was written since the last sync may be lost.
fn save_on_the_way(
    run: &dyn RunView,
    output: &mut dyn Output,
    observer: &mut dyn Observer,
    what: &str,
    failed: &mut FailedSaves,
) -> io::Result<bool> {
    output.sync()?;
    let at = SavePoint { output_checksum: output.checksum(), last: false };
    match observer.checkpoint(run, at) {
        Ok(()) => {
            failed.saved();
            Ok(true)
        }
        Err(e) => {
            failed.failed(what, &e, Instant::now());
            Ok(false)
        }
    }
}

/// Writes the records the scheduler committed to the output.
fn write_out(scheduler: &mut Scheduler, output: &mut dyn Output) -> io::Result<()> {
    if !scheduler.output().is_empty() {
        output.write_all(scheduler.output())?;
        scheduler.clear_output();
    }
    Ok(())
}

/// Saves a run as it ends. A complete branch and bound whose best records are still `due` is saved
/// first without them, then `write_best` writes them: a run whose output cannot take them resumes
/// to write them, rather than to search again.
fn save_at_the_end<R: RunView>(
    run: &mut R,
    due: bool,
    output: &mut dyn Output,
    observer: &mut dyn Observer,
    write_best: impl FnOnce(&mut R, &mut dyn Output) -> io::Result<()>,
) -> io::Result<()> {
    if due {
        if let Err(e) = save(run, output, observer, false) {
            tracing::warn!("cannot save the finished search before its best records: {e}");
        }
        write_best(run, output)?;
    }
    save(run, output, observer, true)
}

/// Syncs the output, then lets the observer save the run; `last`: nothing is written after.
pub(crate) fn save(
    run: &dyn RunView,
    output: &mut dyn Output,
    observer: &mut dyn Observer,
    last: bool,
) -> io::Result<()> {
    output.sync()?;
    observer.checkpoint(run, SavePoint { output_checksum: output.checksum(), last })
}

/// Where the workers of a random-polling run are: threads of this process (workers `0..local`),
/// and processes that join over TCP.
pub struct PollingRoutes<'a> {
    pub local: &'a [Sender<PeerMsg>],
    /// The local workers' counts for termination waves (a distributed run).
    pub local_counts: Option<&'a dyn Fn() -> Vec<Counts>>,
    /// Where other processes reach the local workers.
    pub local_address: Option<String>,
    /// Tells the local workers where every worker is, when that changes.
    pub set_peers: Option<&'a dyn Fn(Vec<PeerEntry>)>,
    /// Gives the local workers the nodes they may still visit after a rollback, which undoes
    /// visits they took from the node limit.
    pub set_nodes_left: &'a dyn Fn(u64),
}

/// A remote process of a polling run.
struct Process {
    first: u32,
    count: u32,
    address: Option<String>,
    link: Box<dyn ProcessLink>,
}

/// Ends a polling run at once: every worker is told to finish (a remote process then ends as at
/// a run's end, rather than trying to join the run again), and what was committed flushed.
fn let_go(routes: &PollingRoutes<'_>, processes: &BTreeMap<u64, Process>, output: &mut dyn Output) -> io::Result<()> {
    finish_all(routes, processes);
    output.flush()
}

/// Tells every worker to finish.
fn finish_all(routes: &PollingRoutes<'_>, processes: &BTreeMap<u64, Process>) {
    for inbox in routes.local {
        let _ = inbox.send(PeerMsg::Finish);
    }
    for p in processes.values() {
        for worker in p.first..p.first + p.count {
            p.link.send(MasterFrame::Peer { worker, message: PeerMsg::Finish });
        }
    }
}

/// How often a distributed run looks for its end (and for lost work messages).
pub const WAVE_EVERY: Duration = Duration::from_millis(20);

/// Writes what the coordinator has committed to the output; `written` counts the output's bytes.
fn flush(coordinator: &mut Coordinator, output: &mut dyn Output, written: &mut u64) -> io::Result<()> {
    if !coordinator.output().is_empty() {
        output.write_all(coordinator.output())?;
        *written += coordinator.output().len() as u64;
        coordinator.clear_output();
    }
    Ok(())
}

/// Saves a complete random-polling run, its best records written after a first save.
fn save_complete_polling(
    coordinator: &mut Coordinator,
    output: &mut dyn Output,
    observer: &mut dyn Observer,
    written: &mut u64,
) -> io::Result<()> {
    let due = coordinator.best_due();
    save_at_the_end(coordinator, due, output, observer, |c, output| {
        c.write_best();
        flush(c, output, written)
    })
}

/// Runs a random-polling run until it ends: delivers the coordinator's messages, writes committed
/// output, pauses the workers for checkpoints and stops, enforces the time limit and the stop file,
/// takes in processes that join, runs termination waves and rolls back when a process is lost. An
/// [`Event::Abort`] ends it at once, keeping the last checkpoint.
pub fn drive_polling(
    coordinator: &mut Coordinator,
    events: &Receiver<Event>,
    routes: &PollingRoutes<'_>,
    output: &mut dyn Output,
    options: &DriveOptions,
    observer: &mut dyn Observer,
) -> io::Result<Outcome> {
    let now = Instant::now();
    let mut timers = Timers::new(options, now);
    let mut processes: BTreeMap<u64, Process> = BTreeMap::new();
    // Processes whose workers left, told to finish: their slots go with their last word, or with
    // their connection if it closes first.
    let mut leavers: BTreeMap<u64, (u32, u32)> = BTreeMap::new();
    let mut next_wave = routes.local_counts.map(|_| now + WAVE_EVERY);
    // The output's length: a rollback cuts it back only if records were written since the snapshot.
    let mut written = coordinator.totals().output_bytes;
    let mut run = || loop {
        deliver_all(coordinator, routes, &processes);
        if let Some(len) = coordinator.reset_complete() {
            if let Some(left) = coordinator.nodes_left() {
                (routes.set_nodes_left)(left);
            }
            timers.snapshots.taken(options, Instant::now(), false);
            if len < written {
                output.rewind(len).map_err(|e| {
                    io::Error::other(format!(
                        "a remote worker was lost and the work since the last snapshot must be redone, but \
                         the records written since cannot be taken back from this output ({e}), so the run \
                         stops (resumed from a checkpoint, if it has one, it prints again the records written \
                         since that checkpoint; run with --output FILE or --count-only to survive lost \
                         workers)"
                    ))
                })?;
                written = len;
            }
            continue;
        }
        flush(coordinator, output, &mut written)?;
        if let Some(why) = coordinator.pause_complete() {
            // A target reached writes the best records as the pause completes: before the save.
            flush(coordinator, output, &mut written)?;
            match why {
                PauseFor::Snapshot | PauseFor::Checkpoint | PauseFor::Leave => {
                    if why == PauseFor::Checkpoint {
                        let failed = &mut timers.failed_saves;
                        save_on_the_way(coordinator, output, observer, "a periodic checkpoint", failed)?;
                    } else {
                        // A rollback to this snapshot cuts the output back to here.
                        output.mark()?;
                    }
                    timers.snapshots.taken(options, Instant::now(), true);
                    if why == PauseFor::Snapshot {
                        let (nodes, waiting) = (coordinator.totals().nodes, coordinator.queued());
                        let took = timers.snapshots.took.as_secs_f64() * 1e3;
                        tracing::debug!("a snapshot at {nodes} nodes, {waiting} waiting (the pause took {took:.1} ms)");
                    }
                    coordinator.resume();
                    // Processes whose workers all left go once told to finish.
                    deliver_all(coordinator, routes, &processes);
                    let gone: Vec<u64> = processes
                        .iter()
                        .filter(|(_, p)| coordinator.left(p.first, p.count))
                        .map(|(&id, _)| id)
                        .collect();
                    for id in &gone {
                        let p = processes.remove(id).expect("listed");
                        leavers.insert(*id, (p.first, p.count));
                    }
                    if !gone.is_empty() {
                        announce_peers(routes, &processes);
                    }
                }
                PauseFor::Stop(reason) => {
                    save(coordinator, output, observer, true)?;
                    coordinator.finish(Outcome::Stopped(reason));
                }
                PauseFor::Fail(failure) => {
                    save(coordinator, output, observer, true)?;
                    coordinator.finish(Outcome::Failed(failure));
                }
            }
            continue;
        }
        if let Some(outcome) = coordinator.outcome() {
            let outcome = outcome.clone();
            if outcome == Outcome::Complete {
                save_complete_polling(coordinator, output, observer, &mut written)?;
            }
            observer.finish(coordinator);
            return Ok(outcome);
        }

        let now = Instant::now();
        let due = timers.due(options, now);
        if due.tick {
            observer.tick(coordinator);
        }
        if due.checkpoint {
            coordinator.request_pause(PauseFor::Checkpoint);
            timers.rearm_checkpoint(options, now);
        }
        if timers.snapshots.due(now) {
            match processes.is_empty() {
                // Nothing can be lost until a process joins.
                true => timers.snapshots.taken(options, now, false),
                false => {
                    coordinator.request_pause(PauseFor::Snapshot);
                    timers.snapshots.asked(now);
                }
            }
        }
        if let Some(reason) = due.stop {
            coordinator.request_pause(PauseFor::Stop(reason));
        }
        if let (Some(at), Some(local_counts)) = (next_wave, routes.local_counts)
            && now >= at
        {
            coordinator.look_for_lost_work();
            if let Some(wave) = coordinator.start_wave() {
                for p in processes.values() {
                    p.link.send(MasterFrame::Probe { wave });
                }
                coordinator.wave_counts(wave, local_counts());
            }
            next_wave = Some(now + WAVE_EVERY);
            continue;
        }

        let Some(event) = next_event(events, timers.wake(next_wave), now)? else { continue };
        match event {
            Event::Poll(report) => coordinator.handle(report),
            Event::Stop(reason) => coordinator.request_pause(PauseFor::Stop(reason)),
            Event::Abort(reason) => {
                // A run whose end is decided (a signal as it ends) ends as decided, and saved so.
                if let Some(outcome) = coordinator.end_now() {
                    flush(coordinator, output, &mut written)?;
                    if outcome == Outcome::Complete {
                        save_complete_polling(coordinator, output, observer, &mut written)?;
                    }
                    let_go(routes, &processes, output)?;
                    observer.finish(coordinator);
                    return Ok(outcome);
                }
                let_go(routes, &processes, output)?;
                return Ok(Outcome::Stopped(reason));
            }
            Event::Died(failure) => {
                let_go(routes, &processes, output)?;
                observer.finish(coordinator);
                return Ok(Outcome::Failed(failure));
            }
            Event::ProcessJoined { process, threads, peer_address, link } => {
                let first = coordinator.add_workers(threads);
                link.send(MasterFrame::Assigned { first });
                processes.insert(process, Process { first, count: threads, address: peer_address, link });
                announce_peers(routes, &processes);
            }
            Event::ProcessLeaving(process) => {
                if let Some(p) = processes.get(&process) {
                    tracing::info!(process, "a remote polling worker asks to leave: pausing to take its nodes");
                    coordinator.leave(p.first, p.count);
                }
            }
            Event::ProcessLeft(process) => {
                if let Some(p) = processes.remove(&process) {
                    coordinator.remove_workers(p.first, p.count);
                    announce_peers(routes, &processes);
                } else if let Some((first, count)) = leavers.remove(&process) {
                    coordinator.remove_workers(first, count);
                }
            }
            Event::Counts { wave, counts, .. } => coordinator.wave_counts(wave, counts),
            Event::Joined { .. }
            | Event::Message(..)
            | Event::Disconnected(_)
            | Event::Left(_)
            | Event::Latency { .. } => {}
        }
    };
    let result = run();
    if result.is_err() {
        // The run fails here (its output or checkpoint cannot be written): its workers end too,
        // rather than wait to join it again.
        finish_all(routes, &processes);
    }
    result
}

/// Sends the coordinator's messages.
fn deliver_all(coordinator: &mut Coordinator, routes: &PollingRoutes<'_>, processes: &BTreeMap<u64, Process>) {
    while let Some((worker, message)) = coordinator.poll_send() {
        deliver(routes, processes, worker, message);
    }
}

/// Sends a coordinator's message to a local thread or through its process's connection.
fn deliver(routes: &PollingRoutes<'_>, processes: &BTreeMap<u64, Process>, worker: u32, message: PeerMsg) {
    if let Some(inbox) = routes.local.get(worker as usize) {
        let _ = inbox.send(message);
        return;
    }
    if let Some(p) = processes.values().find(|p| (p.first..p.first + p.count).contains(&worker)) {
        p.link.send(MasterFrame::Peer { worker, message });
    }
}

/// Tells every process (and the local workers) where every worker is.
fn announce_peers(routes: &PollingRoutes<'_>, processes: &BTreeMap<u64, Process>) {
    let mut table = Vec::new();
    if let (false, Some(address)) = (routes.local.is_empty(), &routes.local_address) {
        table.push(PeerEntry { first: 0, count: routes.local.len() as u32, address: address.clone() });
    }
    for p in processes.values() {
        if let Some(address) = &p.address {
            table.push(PeerEntry { first: p.first, count: p.count, address: address.clone() });
        }
    }
    for p in processes.values() {
        p.link.send(MasterFrame::Peers(table.clone()));
    }
    if let Some(set) = routes.set_peers {
        set(table);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::SchedulerConfig;
    use bts_protocol::NodeBytes;

    #[test]
    fn failing_periodic_checkpoints_are_warned_of_once_a_minute() {
        let (mut failed, e, t0) = (FailedSaves::default(), io::Error::other("disk full"), Instant::now());
        let at = |s: u64| t0 + Duration::from_secs(s);
        let warned: Vec<bool> = [0, 10, 59, 60, 61, 119, 120].map(|s| failed.failed("a save", &e, at(s))).into();
        assert_eq!(warned, [true, false, false, true, false, false, true]);
        // Once saves work again, the next failure is warned of at once.
        failed.saved();
        assert!(failed.failed("a save", &e, at(130)));
        assert!(!failed.failed("a save", &e, at(131)));
    }

    /// An output whose syncs fail, as a file's on a full or failing disk.
    struct Unsyncable;

    impl Write for Unsyncable {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Output for Unsyncable {
        fn sync(&mut self) -> io::Result<()> {
            Err(io::Error::other("the disk failed"))
        }
    }

    /// Counts the checkpoints written.
    struct Saves(u32);

    impl Observer for Saves {
        fn checkpoint(&mut self, _run: &dyn RunView, _at: SavePoint) -> io::Result<()> {
            self.0 += 1;
            Ok(())
        }
    }

    /// Snapshots come every `snapshot_every`, or further apart when pausing takes long; a rollback
    /// sets the clock going again without taking its length for a pause's.
    #[test]
    fn snapshots_cost_at_most_a_fiftieth_of_the_run() {
        let options = DriveOptions { snapshot_every: Some(Duration::from_secs(60)), ..DriveOptions::default() };
        let t0 = Instant::now();
        let mut timers = Timers::new(&options, t0);
        let s = |secs: f64| t0 + Duration::from_secs_f64(secs);
        assert!(!timers.snapshots.due(s(59.9)) && timers.snapshots.due(s(60.0)));
        timers.snapshots.asked(s(60.0));
        assert!(!timers.snapshots.due(s(100.0)), "one pause at a time");
        timers.snapshots.taken(&options, s(60.1), true);
        assert_eq!(timers.snapshots.next, Some(s(120.1)), "a quick pause: the next in a minute");
        timers.snapshots.asked(s(120.1));
        timers.snapshots.taken(&options, s(123.1), true);
        assert_eq!(timers.snapshots.next, Some(s(273.1)), "a pause of 3 s: the next 150 s later");
        // A checkpoint's pause, not asked for as a snapshot, keeps the last length.
        timers.snapshots.taken(&options, s(200.0), true);
        assert_eq!(timers.snapshots.next, Some(s(350.0)));
        timers.snapshots.asked(s(350.0));
        timers.snapshots.taken(&options, s(400.0), false);
        assert_eq!(timers.snapshots.next, Some(s(550.0)), "a rollback is not a pause");
        assert!(timers.snapshots.due(s(550.0)));
        // Budget mode takes none.
        let mut budget = Timers::new(&DriveOptions::default(), t0);
        budget.snapshots.taken(&DriveOptions::default(), s(1.0), true);
        assert!(!budget.snapshots.due(s(1e6)));
    }

    /// The time limit stops the run once: after it the driver sleeps until its other timers (it
    /// woke at once, again and again, a core spent while the jobs out came back).
    #[test]
    fn the_time_limit_fires_once_and_then_sleeps() {
        let t0 = Instant::now();
        let s = |secs: f64| t0 + Duration::from_secs_f64(secs);
        let options =
            DriveOptions { deadline: Some(s(1.0)), tick: Some(Duration::from_secs(5)), ..DriveOptions::default() };
        let mut timers = Timers::new(&options, t0);
        assert_eq!(timers.wake(None), Some(s(1.0)));
        assert_eq!(timers.due(&options, s(0.5)).stop, None);
        assert_eq!(timers.due(&options, s(1.0)).stop, Some(StopReason::TimeLimit));
        assert_eq!(timers.wake(None), Some(s(5.0)), "the tick, not the past deadline");
        assert_eq!(timers.due(&options, s(1.1)).stop, None);
    }

    /// A periodic checkpoint whose output cannot be synced fails the run (the records since the
    /// last sync may be lost), and writes no checkpoint that would count them as committed.
    #[test]
    fn an_output_that_cannot_be_synced_fails_the_run_at_a_periodic_checkpoint() {
        let mut scheduler = Scheduler::new(SchedulerConfig::default(), NodeBytes::from_slice(b"root"));
        let (_events, rx) = std::sync::mpsc::channel();
        let options = DriveOptions {
            checkpoint_every: Some(Duration::from_millis(1)),
            workers_may_join: true,
            ..DriveOptions::default()
        };
        let mut saves = Saves(0);
        let error = drive(&mut scheduler, &rx, &mut Unsyncable, &options, &mut saves).unwrap_err();
        assert!(error.to_string().contains("the disk failed"), "{error}");
        assert_eq!(saves.0, 0);
    }
}
