//! The driver: moves messages between the [`Scheduler`] and the workers' channels, writes committed
//! output, takes checkpoints, and watches the clock and the stop file. All I/O of the master
//! happens here.

use crate::polling::{Coordinator, PauseFor};
use crate::scheduler::{Outcome, Scheduler, StopReason, WorkerId};
use crate::view::RunView;
use bts_protocol::polling::{PeerMsg, PollReport};
use bts_protocol::{FromWorker, ToWorker};
use std::collections::HashMap;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// How the master reaches one worker.
pub trait Link: Send {
    /// Delivers a message; false if the worker is gone.
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

/// What reaches the master, from whatever carries it.
pub enum Event {
    /// A worker is ready; the master sends it messages through `link`.
    Joined {
        worker: WorkerId,
        threads: u32,
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
    /// Stop the run once the jobs out with workers are back (a signal, ...).
    Stop(StopReason),
    /// Stop now: save what is committed and leave the jobs out with workers to the checkpoint.
    Abort(StopReason),
    /// A report of a random-polling worker.
    Poll(PollReport),
}

/// Where committed output records go.
pub trait Output: Write {
    /// Makes everything written so far durable (flush, and sync a file to disk).
    fn sync(&mut self) -> io::Result<()>;
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
    fn checkpoint(&mut self, _run: &dyn RunView) -> io::Result<()> {
        Ok(())
    }

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
    /// More workers may join later (a listening master); otherwise losing every worker ends the run.
    pub workers_may_join: bool,
    /// Call [`Observer::tick`] this often.
    pub tick: Option<Duration>,
}

/// How often the stop file is looked for.
const STOP_FILE_POLL: Duration = Duration::from_millis(100);

/// The driver's timers.
struct Timers {
    tick: Option<Instant>,
    checkpoint: Option<Instant>,
    stop_file: Option<Instant>,
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
    let now = Instant::now();
    let mut timers = Timers {
        tick: options.tick.map(|t| now + t),
        checkpoint: options.checkpoint_every.map(|t| now + t),
        stop_file: options.stop_file.as_ref().map(|_| now),
    };
    let mut had_workers = false;
    loop {
        while let Some((worker, message)) = scheduler.poll_send() {
            let delivered = links.get(&worker).is_some_and(|link| link.send(message));
            if !delivered {
                links.remove(&worker);
                scheduler.handle_disconnect(worker);
            }
        }
        if !scheduler.output().is_empty() {
            output.write_all(scheduler.output())?;
            scheduler.clear_output();
        }
        if let Some(outcome) = scheduler.outcome() {
            let outcome = outcome.clone();
            save(scheduler, output, observer)?;
            observer.finish(scheduler);
            return Ok(outcome);
        }
        if had_workers && scheduler.workers() == 0 && !options.workers_may_join {
            scheduler.stop(StopReason::NoWorkers);
            continue;
        }

        let now = Instant::now();
        if timers.tick.is_some_and(|at| now >= at) {
            observer.tick(scheduler);
            scheduler.clear_job_sizes();
            timers.tick = options.tick.map(|t| now + t);
        }
        if timers.checkpoint.is_some_and(|at| now >= at) {
            if let Err(e) = save(scheduler, output, observer) {
                tracing::warn!("cannot write a periodic checkpoint: {e}; the previous one stays valid");
            }
            timers.checkpoint = options.checkpoint_every.map(|t| Instant::now() + t);
        }
        if timers.stop_file.is_some_and(|at| now >= at) {
            if options.stop_file.as_ref().is_some_and(|f| f.exists()) {
                tracing::info!("stop file found: stopping");
                scheduler.stop(StopReason::StopFile);
                timers.stop_file = None;
            } else {
                timers.stop_file = Some(now + STOP_FILE_POLL);
            }
        }
        if options.deadline.is_some_and(|d| now >= d) {
            scheduler.stop(StopReason::TimeLimit);
        }

        let wake = [options.deadline, timers.tick, timers.checkpoint, timers.stop_file].into_iter().flatten().min();
        let event = match wake {
            Some(at) => match events.recv_timeout(at.saturating_duration_since(now)) {
                Ok(e) => e,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Err(io::Error::other("every event source closed")),
            },
            None => events.recv().map_err(|_| io::Error::other("every event source closed"))?,
        };
        match event {
            Event::Joined { worker, threads, link } => {
                had_workers = true;
                links.insert(worker, link);
                scheduler.add_worker(worker, threads);
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
            Event::Stop(reason) => scheduler.stop(reason),
            Event::Poll(_) => {}
            Event::Abort(reason) => {
                if !scheduler.output().is_empty() {
                    output.write_all(scheduler.output())?;
                    scheduler.clear_output();
                }
                save(scheduler, output, observer)?;
                observer.finish(scheduler);
                return Ok(Outcome::Stopped(reason));
            }
        }
    }
}

/// Syncs the output, then lets the observer save the run.
pub(crate) fn save(run: &dyn RunView, output: &mut dyn Output, observer: &mut dyn Observer) -> io::Result<()> {
    output.sync()?;
    observer.checkpoint(run)
}

/// Runs a random-polling run until it ends: delivers the coordinator's messages to the workers'
/// inboxes, writes committed output, pauses the workers for checkpoints and stops, and enforces the
/// time limit and the stop file. An [`Event::Abort`] ends it at once, keeping the last checkpoint.
pub fn drive_polling(
    coordinator: &mut Coordinator,
    events: &Receiver<Event>,
    inboxes: &[Sender<PeerMsg>],
    output: &mut dyn Output,
    options: &DriveOptions,
    observer: &mut dyn Observer,
) -> io::Result<Outcome> {
    let now = Instant::now();
    let mut timers = Timers {
        tick: options.tick.map(|t| now + t),
        checkpoint: options.checkpoint_every.map(|t| now + t),
        stop_file: options.stop_file.as_ref().map(|_| now),
    };
    loop {
        while let Some((worker, message)) = coordinator.poll_send() {
            if let Some(inbox) = inboxes.get(worker as usize) {
                let _ = inbox.send(message);
            }
        }
        if !coordinator.output().is_empty() {
            output.write_all(coordinator.output())?;
            coordinator.clear_output();
        }
        if let Some(why) = coordinator.pause_complete() {
            match why {
                PauseFor::Checkpoint => {
                    if let Err(e) = save(coordinator, output, observer) {
                        tracing::warn!("cannot write a periodic checkpoint: {e}; the previous one stays valid");
                    }
                    coordinator.resume();
                }
                PauseFor::Stop(reason) => {
                    save(coordinator, output, observer)?;
                    coordinator.finish(Outcome::Stopped(reason));
                }
                PauseFor::Fail(failure) => {
                    save(coordinator, output, observer)?;
                    coordinator.finish(Outcome::Failed(failure));
                }
            }
            continue;
        }
        if let Some(outcome) = coordinator.outcome() {
            let outcome = outcome.clone();
            if outcome == Outcome::Complete {
                save(coordinator, output, observer)?;
            }
            observer.finish(coordinator);
            return Ok(outcome);
        }

        let now = Instant::now();
        if timers.tick.is_some_and(|at| now >= at) {
            observer.tick(coordinator);
            timers.tick = options.tick.map(|t| now + t);
        }
        if timers.checkpoint.is_some_and(|at| now >= at) {
            coordinator.request_pause(PauseFor::Checkpoint);
            timers.checkpoint = options.checkpoint_every.map(|t| now + t);
        }
        if timers.stop_file.is_some_and(|at| now >= at) {
            if options.stop_file.as_ref().is_some_and(|f| f.exists()) {
                tracing::info!("stop file found: stopping");
                coordinator.request_pause(PauseFor::Stop(StopReason::StopFile));
                timers.stop_file = None;
            } else {
                timers.stop_file = Some(now + STOP_FILE_POLL);
            }
        }
        if options.deadline.is_some_and(|d| now >= d) {
            coordinator.request_pause(PauseFor::Stop(StopReason::TimeLimit));
        }

        let wake = [options.deadline, timers.tick, timers.checkpoint, timers.stop_file].into_iter().flatten().min();
        let event = match wake {
            Some(at) => match events.recv_timeout(at.saturating_duration_since(now)) {
                Ok(e) => e,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Err(io::Error::other("every event source closed")),
            },
            None => events.recv().map_err(|_| io::Error::other("every event source closed"))?,
        };
        match event {
            Event::Poll(report) => coordinator.handle(report),
            Event::Stop(reason) => coordinator.request_pause(PauseFor::Stop(reason)),
            Event::Abort(reason) => {
                for inbox in inboxes {
                    let _ = inbox.send(PeerMsg::Finish);
                }
                output.flush()?;
                return Ok(Outcome::Stopped(reason));
            }
            Event::Joined { .. } | Event::Message(..) | Event::Disconnected(_) | Event::Latency { .. } => {}
        }
    }
}
