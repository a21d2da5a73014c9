//! Running a tree on local worker threads, from a program: the library's main entry point.
//!
//! ```
//! use bts::{Run, RunOptions};
//! use bts_trees::Queens;
//!
//! let mut records = Vec::new();
//! let finished = Run::new("queens", Queens::new(6))
//!     .options(RunOptions { workers: 2, ..RunOptions::default() })
//!     .run(&mut records)
//!     .unwrap();
//! assert!(finished.summary.complete);
//! assert_eq!(finished.summary.totals.outputs, 4);
//! assert_eq!(String::from_utf8(records).unwrap().lines().count(), 4);
//! ```

use crate::summary::Summary;
use bts_master::{DriveOptions, Event, Outcome, Scheduler, SchedulerConfig, StopReason, drive};
use bts_protocol::ToWorker;
use bts_worker::{RunnerSettings, Searcher, Tree, TreeSearcher, WorkerLoop, run_worker};
use std::io::Write;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Local worker threads.
    pub workers: usize,
    /// Job order, budget policy, node limit.
    pub scheduler: SchedulerConfig,
    /// Stop after this long (exit status 3 on the command line).
    pub time_limit: Option<Duration>,
    /// Count output records without writing them.
    pub count_only: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            scheduler: SchedulerConfig::default(),
            time_limit: None,
            count_only: false,
        }
    }
}

/// Why a run could not take place or went wrong outside of any job.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The tree or the workers could not be set up.
    #[error("{0}")]
    Setup(String),
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
}

/// A run that ended: how, and its totals.
#[derive(Debug)]
pub struct Finished {
    pub outcome: Outcome,
    pub summary: Summary,
}

/// Asks a run to stop (from a signal handler thread, a timer, ...).
#[derive(Clone)]
pub struct Stopper(Sender<Event>);

impl Stopper {
    pub fn stop(&self, reason: StopReason) {
        let _ = self.0.send(Event::Stop(reason));
    }
}

/// A run being set up.
pub struct Run {
    name: String,
    searcher: Arc<dyn Searcher>,
    options: RunOptions,
    events: (Sender<Event>, Receiver<Event>),
}

impl Run {
    /// A run of `tree`, called `name` in the summary.
    pub fn new<T: Tree>(name: &str, tree: T) -> Self {
        Self::with_searcher(name, Arc::new(TreeSearcher::new(tree)))
    }

    /// A run of a type-erased tree (from the registry, or a legacy program).
    pub fn with_searcher(name: &str, searcher: Arc<dyn Searcher>) -> Self {
        Self {
            name: name.to_string(),
            searcher,
            options: RunOptions::default(),
            events: mpsc::channel(),
        }
    }

    pub fn options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    pub fn stopper(&self) -> Stopper {
        Stopper(self.events.0.clone())
    }

    /// Runs to the end; committed output records go to `output`.
    pub fn run(self, output: &mut dyn Write) -> Result<Finished, RunError> {
        let Run {
            name,
            searcher,
            options,
            events: (events_tx, events_rx),
        } = self;
        if options.workers == 0 {
            return Err(RunError::Setup("a run needs at least one worker".into()));
        }
        let started = Instant::now();
        let root = searcher.root().map_err(RunError::Setup)?;
        let settings = RunnerSettings {
            keep_output: !options.count_only,
        };
        let runners = (0..options.workers)
            .map(|_| searcher.runner(settings))
            .collect::<Result<Vec<_>, _>>();
        let runners = runners.map_err(RunError::Setup)?;

        let mut threads = Vec::new();
        for (id, mut runner) in runners.into_iter().enumerate() {
            let id = id as u64;
            let (link, inbox) = mpsc::channel::<ToWorker>();
            let _ = events_tx.send(Event::Joined {
                worker: id,
                threads: 1,
                link,
            });
            let to_master = events_tx.clone();
            let thread = std::thread::Builder::new()
                .name(format!("bts-worker-{id}"))
                .spawn(move || {
                    // Tells the master when this thread ends, however it ends.
                    let _guard = DisconnectGuard(id, to_master.clone());
                    let mut send = |m| to_master.send(Event::Message(id, m)).is_ok();
                    run_worker(&mut *runner, &inbox, &mut send, WorkerLoop::default());
                });
            threads.push(
                thread
                    .map_err(|e| RunError::Setup(format!("cannot start a worker thread: {e}")))?,
            );
        }

        let initial_budget = options.scheduler.budget.initial;
        let mut scheduler = Scheduler::new(options.scheduler.clone(), root);
        let drive_options = DriveOptions {
            deadline: options.time_limit.map(|t| started + t),
            workers_may_join: false,
            tick: None,
        };
        let result = drive(
            &mut scheduler,
            &events_rx,
            output,
            &drive_options,
            &mut |_| {},
        );
        // Whatever happened, let the threads go.
        drop(events_rx);
        for t in threads {
            let _ = t.join();
        }
        let outcome = result?;
        let summary = Summary::new(
            &name,
            &outcome,
            &scheduler,
            options.workers,
            initial_budget,
            started.elapsed(),
        );
        Ok(Finished { outcome, summary })
    }
}

struct DisconnectGuard(u64, Sender<Event>);

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        let _ = self.1.send(Event::Disconnected(self.0));
    }
}
