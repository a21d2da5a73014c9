//! The driver: moves messages between the [`Scheduler`] and the workers' channels, writes committed
//! output, and enforces the time limit. All I/O of the master happens here.

use crate::scheduler::{Outcome, Scheduler, StopReason, WorkerId};
use bts_protocol::{FromWorker, ToWorker};
use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

/// What reaches the master, from whatever carries it.
pub enum Event {
    /// A worker is ready; the master sends it messages through `link`.
    Joined {
        worker: WorkerId,
        threads: u32,
        link: Sender<ToWorker>,
    },
    Message(WorkerId, FromWorker),
    /// The worker's connection or thread is gone.
    Disconnected(WorkerId),
    /// Stop the run (a signal, a stop file, ...).
    Stop(StopReason),
}

#[derive(Clone, Debug, Default)]
pub struct DriveOptions {
    /// Stop when this moment passes.
    pub deadline: Option<Instant>,
    /// More workers may join later (a listening master); otherwise losing every worker ends the run.
    pub workers_may_join: bool,
    /// Called at most this often with the scheduler, for progress reports.
    pub tick: Option<Duration>,
}

/// Runs the scheduler until the run ends. Committed output records are written to `output` (and
/// flushed before returning); an error writing them ends the run with that error.
pub fn drive(
    scheduler: &mut Scheduler,
    events: &Receiver<Event>,
    output: &mut dyn Write,
    options: &DriveOptions,
    on_tick: &mut dyn FnMut(&Scheduler),
) -> io::Result<Outcome> {
    let mut links: HashMap<WorkerId, Sender<ToWorker>> = HashMap::new();
    let mut next_tick = options.tick.map(|t| Instant::now() + t);
    let mut had_workers = false;
    loop {
        while let Some((worker, message)) = scheduler.poll_send() {
            let delivered = links
                .get(&worker)
                .is_some_and(|link| link.send(message).is_ok());
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
            output.flush()?;
            return Ok(outcome.clone());
        }
        if had_workers && scheduler.workers() == 0 && !options.workers_may_join {
            scheduler.stop(StopReason::NoWorkers);
            continue;
        }

        let now = Instant::now();
        if let (Some(tick), Some(at)) = (options.tick, next_tick)
            && now >= at
        {
            on_tick(scheduler);
            next_tick = Some(now + tick);
        }
        if options.deadline.is_some_and(|d| now >= d) {
            scheduler.stop(StopReason::TimeLimit);
        }
        let wake = [options.deadline, next_tick].into_iter().flatten().min();
        let event = match wake {
            Some(at) => match events.recv_timeout(at.saturating_duration_since(now)) {
                Ok(e) => e,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(io::Error::other("every event source closed"));
                }
            },
            None => events
                .recv()
                .map_err(|_| io::Error::other("every event source closed"))?,
        };
        match event {
            Event::Joined {
                worker,
                threads,
                link,
            } => {
                had_workers = true;
                links.insert(worker, link);
                scheduler.add_worker(worker, threads);
            }
            Event::Message(worker, message) => {
                if let Err(violation) = scheduler.handle_message(worker, message) {
                    tracing::warn!("{violation}; dropping the worker");
                    links.remove(&worker);
                    scheduler.handle_disconnect(worker);
                }
            }
            Event::Disconnected(worker) => {
                links.remove(&worker);
                scheduler.handle_disconnect(worker);
            }
            Event::Stop(reason) => scheduler.stop(reason),
        }
    }
}
