//! Running a tree on local worker threads, from a program: the library's main entry point.
//!
//! ```
//! use bts::{Run, RunOptions};
//! use bts::trees::Queens;
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

use crate::monitor::{Monitor, TICK};
pub use crate::monitor::{MonitorOptions, ProgressMode};
use crate::summary::{BestSummary, Summary, TreeTotals};
use bts_checkpoints::{Checkpoint, OutputSeal, StoredMode, StoredOptimum, StoredOptions};
use bts_master::polling::{Coordinator, StartPlan};
use bts_master::{
    BudgetState, Discard, DriveOptions, Event, Observer, Outcome, Output, Pending, Place, Plain, PollingRoutes,
    RunView, SavePoint, Scheduler, SchedulerConfig, StopReason, Totals, deal, drive, drive_polling,
};
use bts_protocol::Returned;
use bts_protocol::polling::{Counts, PeerMsg, SplitRule};
use bts_protocol::{PeerEntry, WireMode};
use bts_protocol::{ToWorker, TreeSpec};
use bts_worker::peers::{PeerServer, Router};
use bts_worker::polling::{Shared, Start, Termination, run_polling_worker};
use bts_worker::{RunnerSettings, Searcher, Tree, TreeSearcher, WorkerLoop, run_worker};
use std::io::{self, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Local worker threads.
    pub workers: usize,
    /// Job order, budget policy, node limit.
    pub scheduler: SchedulerConfig,
    /// Stop after this long (exit status 3 on the command line).
    pub time_limit: Option<Duration>,
    /// Stop when this file appears.
    pub stop_file: Option<PathBuf>,
    /// Count output records without writing them: the run writes nothing to its output (a branch
    /// and bound's best solutions are in the summary).
    pub count_only: bool,
    /// Save the run to this file when it ends (and periodically with `checkpoint_every`).
    pub checkpoint: Option<PathBuf>,
    /// Also save it this often while it runs (only with `checkpoint`).
    pub checkpoint_every: Option<Duration>,
    /// The output file, as recorded in checkpoints: relative to the checkpoint's folder when it lies
    /// in it (records go to the writer given to `run`).
    pub output_path: Option<PathBuf>,
    /// Accept remote workers (`bts worker`) during the run.
    pub listen: Option<ListenOptions>,
    /// Progress display and history files.
    pub monitor: MonitorOptions,
    /// Budget mode (a master's job list) or random polling (work stealing).
    pub mode: RunMode,
}

/// How work is shared among workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RunMode {
    /// The master keeps the job list and hands out budgeted jobs.
    #[default]
    Budget,
    /// Random polling: every worker owns a stack and idle workers steal from random others.
    Polling { split: SplitRule, start: PollingStart },
}

/// How the workers of a new random-polling run get their first work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PollingStart {
    /// Every worker splits the root ⌈log2 P⌉ times by the bits of its index (Sanders).
    #[default]
    Selective,
    /// Worker 0 takes the root; the others steal.
    Plain,
}

/// How often a random-polling run with remote workers takes a snapshot, unless told.
pub const DEFAULT_SNAPSHOT_EVERY: Duration = Duration::from_secs(60);

/// How to accept remote workers.
#[derive(Clone, Debug)]
pub struct ListenOptions {
    /// Where to listen, `host:port` (port 0: any free port).
    pub address: String,
    /// The shared token; empty means none, which is allowed on loopback only.
    pub token: Vec<u8>,
    /// Write the bound address here (for `bts worker --connect-file` and launchers).
    pub address_file: Option<PathBuf>,
    /// Also write the token there (the rendezvous file of a cluster launch; created private).
    pub token_in_address_file: bool,
    /// The address file is a cluster launch's rendezvous file: marked `finished` at the end.
    pub rendezvous: bool,
    /// A remote worker silent this long is dropped and its jobs go back to the job list.
    pub worker_timeout: Duration,
    /// Random polling: pause every worker this often for a snapshot held in memory, the point a
    /// lost process takes the run back to (stretched to keep the pauses under 2% of the run).
    pub snapshot_every: Duration,
    /// Connections beyond this many at once are refused.
    pub max_connections: usize,
}

impl ListenOptions {
    pub fn new(address: &str) -> Self {
        Self {
            address: address.to_string(),
            token: Vec::new(),
            address_file: None,
            token_in_address_file: false,
            rendezvous: false,
            worker_timeout: Duration::from_secs(10),
            snapshot_every: DEFAULT_SNAPSHOT_EVERY,
            // Connections are tasks: a thousand workers cost the master no thread and little memory.
            max_connections: 4096,
        }
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        Self {
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            scheduler: SchedulerConfig::default(),
            time_limit: None,
            stop_file: None,
            count_only: false,
            checkpoint: None,
            checkpoint_every: None,
            output_path: None,
            listen: None,
            monitor: MonitorOptions { progress: ProgressMode::Never, hist: None, freq: None },
            mode: RunMode::Budget,
        }
    }
}

/// Why a run could not take place or went wrong outside of any job.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The tree or the workers could not be set up.
    #[error("{0}")]
    Setup(String),
    /// What was asked cannot be done with this tree or these options.
    #[error("{0}")]
    Unsupported(String),
    /// The address cannot be listened on.
    #[error("cannot listen on {address}: {source}")]
    Listen { address: String, source: std::io::Error },
    /// The checkpoint file cannot be written.
    #[error("cannot write the checkpoint {path}: {source}")]
    Checkpoint { path: PathBuf, source: std::io::Error },
    /// The history file (`--hist`) or the job sizes file (`--freq`) cannot be written; the error
    /// names the file.
    #[error("cannot write the {0}")]
    History(std::io::Error),
    /// The run broke off as it went: its output cannot be written, or a lost worker's work cannot
    /// be redone ([`BrokeOff`]).
    #[error("{}", .0.error)]
    Broke(Box<BrokeOff>),
    /// The checkpoint to resume from cannot be read ([`load_checkpoint`](crate::load_checkpoint)).
    #[error("cannot resume: {0}")]
    Load(#[from] bts_checkpoints::LoadError),
}

/// A run that ended: how, and its totals. The rendezvous file of a cluster launch says `finished`
/// once this is dropped: the launch's other ranks wait for that, and a launcher stopping the launch
/// kills this process as soon as one of them exits, so tell the run's end first.
#[derive(Debug)]
pub struct Finished {
    pub outcome: Outcome,
    pub summary: Summary,
    /// The checkpoint written when the run ended, if any.
    pub checkpoint: Option<PathBuf>,
    /// Why the checkpoint could not be written when the run ended ([`RunError::Checkpoint`]); the
    /// previous one stays valid.
    pub checkpoint_error: Option<RunError>,
    /// What the run did after its checkpoint's last save, if anything (a random-polling run stopped
    /// at once takes no new one): a resumed run does it again.
    pub unsaved: Option<Unsaved>,
    /// Held for its drop, which marks a cluster launch's rendezvous file `finished`.
    _rendezvous_end: Option<crate::remote::FinishedMark>,
}

/// A run that broke off ([`RunError::Broke`]). Like [`Finished`], it marks a cluster launch's
/// rendezvous file `finished` once dropped: report it first.
#[derive(Debug)]
pub struct BrokeOff {
    pub error: std::io::Error,
    /// What it did up to then (outcome `failed`); the last checkpoint it saved is whole.
    pub summary: Summary,
    /// What a run resumed from that checkpoint does again.
    pub unsaved: Option<Unsaved>,
    _rendezvous_end: Option<crate::remote::FinishedMark>,
}

/// What a run did after its checkpoint's last save.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unsaved {
    pub nodes: u64,
    /// Records written to stdout since, which a resumed run writes again (a file is cut back).
    pub printed: u64,
}

/// Asks a run to stop (from a signal handler thread, a timer, ...).
#[derive(Clone)]
pub struct Stopper(Sender<Event>, bool, Arc<AtomicBool>);

impl Stopper {
    /// Whether [`abort`](Self::abort) saves what is committed: random polling cannot save without
    /// the pause an abort cuts short, and keeps its last checkpoint instead.
    pub fn abort_saves(&self) -> bool {
        !self.1
    }

    /// Whether a budget-mode run is stopping already (a limit, the stop file, an earlier stop) and
    /// waits for the jobs out with workers: a stop changes nothing then, an abort ends the wait. (A
    /// polling run's pause is not waited for so long: this stays false.)
    pub fn stopping(&self) -> bool {
        self.2.load(Ordering::Relaxed)
    }

    /// Stop once the jobs out with workers are back: a tree's jobs end within 4,096 nodes, handing
    /// back the rest of their search; a legacy program's at its `done`. `reason` is what the
    /// outcome will say: `Signal`, `StopFile`, `TimeLimit` or `NodeLimit` (the others say what
    /// bts found: a failed job, no workers left, a target reached). False if the run had ended
    /// already: there was nothing to stop.
    pub fn stop(&self, reason: StopReason) -> bool {
        self.0.send(Event::Stop(reason)).is_ok()
    }

    /// Stop now, saving what is committed; the jobs out with workers go to the checkpoint.
    /// `reason` as for [`stop`](Self::stop). False if the run had ended already.
    pub fn abort(&self, reason: StopReason) -> bool {
        self.0.send(Event::Abort(reason)).is_ok()
    }
}

/// A run being set up.
pub struct Run {
    tree: TreeSpec,
    searcher: Arc<dyn Searcher>,
    options: RunOptions,
    resume: Option<Checkpoint>,
    events: (Sender<Event>, Receiver<Event>),
    /// Set when the run begins to stop (see [`Stopper::stopping`]).
    stopping: Arc<AtomicBool>,
}

impl Run {
    /// A run of `tree`, called `name` in summaries and checkpoints.
    pub fn new<T: Tree>(name: &str, tree: T) -> Self {
        Self::with_searcher(TreeSpec::new(name, Vec::<String>::new()), Arc::new(TreeSearcher::new(tree)))
    }

    /// A branch and bound over `tree`: the run keeps the best solution (see [`Optimise`](crate::Optimise)).
    pub fn optimising<T: crate::Optimise>(name: &str, tree: T) -> Self {
        Self::with_searcher(TreeSpec::new(name, Vec::<String>::new()), Arc::new(TreeSearcher::optimising(tree)))
    }

    /// A run of a type-erased tree (from the registry, or a legacy program).
    pub fn with_searcher(tree: TreeSpec, searcher: Arc<dyn Searcher>) -> Self {
        Self {
            tree,
            searcher,
            options: RunOptions::default(),
            resume: None,
            events: mpsc::channel(),
            stopping: Arc::default(),
        }
    }

    /// Carries on the run saved in `checkpoint`, whose tree `searcher` must be. The output writer
    /// given to [`run`](Self::run) must continue the checkpoint's output: the caller cuts the output
    /// file back to `checkpoint.resumed_output_len()` first.
    pub fn resume(checkpoint: Checkpoint, searcher: Arc<dyn Searcher>) -> Self {
        let mut run = Self::with_searcher(checkpoint.tree.clone(), searcher);
        run.resume = Some(checkpoint);
        run
    }

    pub fn options(mut self, options: RunOptions) -> Self {
        self.options = options;
        self
    }

    /// Where the run saves itself, if anywhere.
    pub fn checkpoint(&self) -> Option<&std::path::Path> {
        self.options.checkpoint.as_deref()
    }

    pub fn stopper(&self) -> Stopper {
        Stopper(self.events.0.clone(), matches!(self.options.mode, RunMode::Polling { .. }), self.stopping.clone())
    }

    /// Runs to the end; committed output records go to `output`.
    pub fn run(self, output: &mut dyn Write) -> Result<Finished, RunError> {
        self.run_to(&mut Plain(output))
    }

    /// As [`run`](Self::run), with an output that can be synced to disk before each checkpoint.
    pub fn run_to(self, output: &mut dyn Output) -> Result<Finished, RunError> {
        if self.options.workers == 0 && self.options.listen.is_none() {
            return Err(RunError::Setup("a run needs at least one worker".into()));
        }
        if self.options.scheduler.node_limit == Some(0) {
            // As `--node-limit 0` is: a run that may visit no node does nothing.
            return Err(RunError::Setup("a node limit must be at least 1".into()));
        }
        self.check_resumable()?;
        self.searcher.begin_run();
        // Nothing is written: not even a branch and bound's best records, as with --count-only.
        let mut discard = Discard;
        let output: &mut dyn Output = if self.options.count_only { &mut discard } else { output };
        if let RunMode::Polling { split, start } = self.options.mode {
            return self.run_polling(split, start, output);
        }
        let Run { tree, searcher, options, resume, events: (events_tx, events_rx), stopping } = self;
        let started = Instant::now();
        let settings = RunnerSettings { keep_output: !options.count_only, ..RunnerSettings::default() };
        let runners = (0..options.workers).map(|_| searcher.runner(settings)).collect::<Result<Vec<_>, _>>();
        let runners = runners.map_err(RunError::Setup)?;
        let mut config = options.scheduler.clone();
        config.record_job_sizes = options.monitor.freq.is_some();
        if searcher.optimises() {
            // A job queued behind another would run before the nodes the first one returns: the
            // most promising subtrees would wait, searched later with a worse incumbent.
            config.queue_ahead = Duration::ZERO;
        }
        let (mut scheduler, before) = match resume {
            Some(ck) => {
                let before = Earlier::of(&ck, false);
                let totals = ck.committed_totals();
                let jobs = jobs_in_order(ck.jobs, &ck.options.mode, false);
                (Scheduler::resume(config, totals, Some(ck.budget), jobs), before)
            }
            None => (Scheduler::new(config, searcher.root().map_err(RunError::Setup)?), Earlier::default()),
        };

        let mut threads = Vec::new();
        for (id, mut runner) in runners.into_iter().enumerate() {
            let id = id as u64;
            let (link, inbox) = mpsc::channel::<ToWorker>();
            let _ = events_tx.send(Event::Joined { worker: id, threads: 1, place: Place::LOCAL, link: Box::new(link) });
            let to_master = events_tx.clone();
            threads.push(spawn(format!("bts-worker-{id}"), move || {
                // Tells the master when this thread ends, however it ends.
                let _guard = DisconnectGuard(id, to_master.clone());
                let mut send = |m| to_master.send(Event::Message(id, m)).is_ok();
                run_worker(&mut *runner, &inbox, &mut send, WorkerLoop::default());
            })?);
        }

        let server = match &options.listen {
            Some(listen) => {
                let first_id = options.workers as u64;
                Some(crate::remote::serve(
                    listen,
                    &tree,
                    searcher.input_digest(),
                    settings,
                    WireMode::Budget,
                    &events_tx,
                    first_id,
                )?)
            }
            None => None,
        };
        let drive_options = drive_options(&options, started, server.is_some());
        let nodes_before = scheduler.totals().nodes;
        let mut hooks = Hooks::new(&tree, &options, &searcher, (before, nodes_before), started, &stopping)?;
        // A first checkpoint at once: the path is checked, and a crash from now on loses nothing.
        if let Some(path) = &options.checkpoint {
            let at = SavePoint { output_checksum: output.checksum(), last: false };
            let jobs = scheduler.pending_jobs();
            hooks
                .saver
                .write(&scheduler, jobs, at)
                .map_err(|source| RunError::Checkpoint { path: path.clone(), source })?;
        }
        tracing::info!(tree = %tree.command_line(), workers = options.workers, "the run starts");
        let result = drive(&mut scheduler, &events_rx, output, &drive_options, &mut hooks);
        hooks.ended = Some(Instant::now());
        // Events go first: the links of workers that joined too late for the driver go with them.
        drop(events_rx);
        let rendezvous_end = server.and_then(crate::remote::Listening::finish);
        // After an abort or a failure, jobs are still out with the threads: they give them up (a
        // legacy program is killed), and are left to end on their own.
        if scheduler.in_flight() == 0 {
            for t in threads {
                let _ = t.join();
            }
        } else {
            searcher.abandon();
        }
        finished_or_broke(result, &scheduler, hooks, &*searcher, rendezvous_end)
    }
}

impl Run {
    /// Refuses what would make the run's result wrong without a word: a searcher whose incumbent
    /// an earlier run raised (it would prune solutions this run never reports), and a resume that
    /// changes whether records are written, or turns on keeping every optimal solution (the ties
    /// pruned before cannot come back).
    fn check_resumable(&self) -> Result<(), RunError> {
        let saved = self.resume.as_ref().and_then(|ck| ck.optimum.best.as_ref()).map(|b| b.value);
        if let Some(shared) = self.searcher.incumbent()
            && shared.value() > saved.unwrap_or(bts_protocol::NO_VALUE)
        {
            return Err(RunError::Setup(format!(
                "the searcher's incumbent holds the value {} of an earlier run: a branch and bound needs a new \
                 searcher for each run (or it prunes solutions it never reports)",
                shared.value()
            )));
        }
        let Some(ck) = &self.resume else { return Ok(()) };
        if let Some(optimised) = ck.optimum.optimises
            && optimised != self.searcher.optimises()
        {
            let (was, is) = if optimised {
                ("a branch and bound", "an enumeration")
            } else {
                ("an enumeration", "a branch and bound")
            };
            return Err(RunError::Setup(format!(
                "the checkpoint's run is {was}, and the searcher given to resume it makes {is}: give the searcher \
                 the run was started with (TreeSearcher::optimising for a branch and bound, TreeSearcher::new else)"
            )));
        }
        if ck.options.count_only != self.options.count_only {
            return Err(RunError::Setup(format!(
                "the checkpoint's run {} its records: a resumed run must do the same (count_only {})",
                if ck.options.count_only { "counted without writing" } else { "wrote" },
                ck.options.count_only
            )));
        }
        if self.options.scheduler.optimum.keep_ties && !ck.optimum.keep_ties {
            return Err(RunError::Setup(
                "the checkpoint's run kept one optimal solution, not all: the ties it pruned cannot come back, so \
                 keeping them all must be asked for when the run starts"
                    .into(),
            ));
        }
        Ok(())
    }

    /// A random-polling run on local threads.
    fn run_polling(self, split: SplitRule, start: PollingStart, output: &mut dyn Output) -> Result<Finished, RunError> {
        let Run { tree, searcher, options, resume, events: (events_tx, events_rx), stopping } = self;
        let local = options.workers as u32;
        let started = Instant::now();
        let settings = RunnerSettings { keep_output: !options.count_only, ..RunnerSettings::default() };
        check_mode(&options, &tree, &*searcher)?;
        let stacks: Option<Vec<_>> = (0..local).map(|_| searcher.stack_worker(settings)).collect();
        let stacks = stacks.expect("checked: the tree splits its search");
        // What the run starts from: the root, or the nodes a checkpoint saved.
        let (totals, before, initial_jobs, fresh) = match resume {
            Some(ck) => {
                let (totals, before) = (ck.committed_totals(), Earlier::of(&ck, true));
                (totals, before, jobs_in_order(ck.jobs, &ck.options.mode, true), false)
            }
            None => {
                let root = Pending { depth: 0, node: searcher.root().map_err(RunError::Setup)? };
                (Totals::default(), Earlier::default(), vec![root], true)
            }
        };
        let nodes_before = totals.nodes;
        let nodes: Vec<Returned> = initial_jobs.iter().cloned().map(Returned::from).collect();
        // Local threads start before the coordinator can tell them anything: they take the
        // incumbent (ties, the checkpoint's best) now.
        if let Some(shared) = searcher.incumbent() {
            let value = totals.best.as_ref().map_or(bts_protocol::NO_VALUE, |b| b.value);
            let optimum = options.scheduler.optimum;
            shared.raise(bts_protocol::Incumbent { value, keep_ties: optimum.keep_ties, target: optimum.target });
        }
        // Selective starts visit nodes before the node limit is in force: with one, start plainly.
        let selective = fresh && start == PollingStart::Selective && options.scheduler.node_limit.is_none();
        let distributed = options.listen.is_some();

        let (senders, inboxes): (Vec<Sender<PeerMsg>>, Vec<Receiver<PeerMsg>>) =
            (0..local).map(|_| mpsc::channel()).unzip();
        let router = options
            .listen
            .as_ref()
            .map(|l| Arc::new(Router::new(l.token.clone(), 0, senders.clone(), l.worker_timeout)));
        let shared = Arc::new(Shared {
            peers: match &router {
                Some(r) => Box::new(Arc::clone(r)),
                None => Box::new(senders.clone()),
            },
            termination: match distributed {
                true => Termination::waves(0, local),
                false => Termination::Counter(AtomicUsize::new(local as usize)),
            },
            remaining: AtomicU64::new(options.scheduler.node_limit.unwrap_or(u64::MAX)),
            rule: split,
        });
        // Local workers share the start among themselves; without any, the first process to join
        // gets it.
        let mut starts = deal_start(&nodes, local, fresh, selective);
        let plan = match (local, selective) {
            (0, true) => Some(StartPlan::Root(nodes[0].clone())),
            (0, false) => Some(StartPlan::Nodes(nodes)),
            _ => None,
        };
        let mut coordinator = Coordinator::new(local, totals, options.scheduler.node_limit, initial_jobs.clone())
            .optimising(options.scheduler.optimum);
        // What the coordinator says first is in the inboxes before the workers start: a resumed
        // run whose saved incumbent reaches a new target pauses them after their first nodes.
        while let Some((worker, message)) = coordinator.poll_send() {
            let _ = senders[worker as usize].send(message);
        }
        let seed = started.elapsed().as_nanos() as u64 ^ std::process::id() as u64;
        let mut threads = Vec::new();
        for ((me, stack), inbox) in stacks.into_iter().enumerate().zip(inboxes) {
            let (shared, to_master, start) = (Arc::clone(&shared), events_tx.clone(), starts.remove(0));
            threads.push(spawn(format!("bts-poll-{me}"), move || {
                let mut report = |r| to_master.send(Event::Poll(r)).is_ok();
                if let Err(failure) = run_polling_worker(me as u32, stack, start, inbox, shared, &mut report, seed) {
                    let _ = to_master.send(Event::Died(failure));
                }
            })?);
        }

        let (mut server, mut peer_server) = (None, None);
        if let Some(listen) = &options.listen {
            // Twice as long as a message can take: a work message not there by then is lost.
            let lost_after = 2 * bts_worker::peers::longest_delivery(listen.worker_timeout);
            let looks = lost_after.as_millis() / bts_master::WAVE_EVERY.as_millis();
            coordinator = coordinator.distributed(plan, looks as u64);
            let mode = WireMode::Polling { split };
            server = Some(crate::remote::serve(listen, &tree, searcher.input_digest(), settings, mode, &events_tx, 0)?);
            if let (Some(router), true) = (&router, local > 0) {
                peer_server = Some(crate::remote::serve_peers(listen, Arc::clone(router))?);
            }
        }
        let drive_options = drive_options(&options, started, distributed);
        let mut hooks = Hooks::new(&tree, &options, &searcher, (before, nodes_before), started, &stopping)?;
        if let Some(path) = &options.checkpoint {
            // The first checkpoint holds what the run starts from: the root, or the resumed nodes.
            let at = SavePoint { output_checksum: output.checksum(), last: false };
            hooks
                .saver
                .write(&coordinator, initial_jobs, at)
                .map_err(|source| RunError::Checkpoint { path: path.clone(), source })?;
        }
        tracing::info!(tree = %tree.command_line(), workers = local, "the run starts (random polling)");
        let local_counts = || shared.termination.snapshot();
        let set_peers = |table| {
            if let Some(r) = &router {
                r.set_table(table);
            }
        };
        // Every worker is reset when this is called: none holds nodes taken from the limit.
        let set_nodes_left = |left| shared.remaining.store(left, std::sync::atomic::Ordering::Relaxed);
        let routes = PollingRoutes {
            local: &senders,
            local_counts: distributed.then_some(&local_counts as &dyn Fn() -> Vec<Counts>),
            local_address: peer_server.as_ref().map(|(_, address): &(PeerServer, String)| address.clone()),
            set_peers: distributed.then_some(&set_peers as &dyn Fn(Vec<PeerEntry>)),
            set_nodes_left: &set_nodes_left,
        };
        let result = drive_polling(&mut coordinator, &events_rx, &routes, output, &drive_options, &mut hooks);
        hooks.ended = Some(Instant::now());
        drop(events_rx);
        let rendezvous_end = server.and_then(crate::remote::Listening::finish);
        drop(peer_server);
        // After an abort the threads are told to finish but not waited for.
        if coordinator.outcome().is_some() {
            for t in threads {
                let _ = t.join();
            }
        }
        finished_or_broke(result, &coordinator, hooks, &*searcher, rendezvous_end)
    }
}

/// Random polling needs a tree whose search a worker can split: refused before anything is opened.
pub(crate) fn check_mode(options: &RunOptions, tree: &TreeSpec, searcher: &dyn Searcher) -> Result<(), RunError> {
    let polling = matches!(options.mode, RunMode::Polling { .. });
    if polling && searcher.stack_worker(RunnerSettings::default()).is_none() {
        return Err(RunError::Unsupported(format!(
            "random polling needs a tree that can split its search; `{}` hands its jobs to a program, which cannot: use \
             --mode budget",
            tree.name
        )));
    }
    Ok(())
}

/// How `local` polling workers start from `nodes`: the root shared selectively or given to worker 0,
/// or a checkpoint's nodes dealt out in turn.
fn deal_start(nodes: &[Returned], local: u32, fresh: bool, selective: bool) -> Vec<Start> {
    match (fresh, selective) {
        (true, true) => (0..local).map(|_| Start::Selective { root: nodes[0].clone(), of: local }).collect(),
        (true, false) => (0..local).map(|_| Start::Plain(nodes[0].clone())).collect(),
        (false, _) => deal(nodes.iter().cloned(), local as usize).into_iter().map(Start::Nodes).collect(),
    }
}

/// Starts a thread of the run.
fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<std::thread::JoinHandle<()>, RunError> {
    std::thread::Builder::new()
        .name(name)
        .spawn(f)
        .map_err(|e| RunError::Setup(format!("cannot start a worker thread: {e}")))
}

/// A checkpoint's jobs, saved by a run in mode `saved_by`, in the order a run in random polling
/// (`polling`) or budget mode takes them. Budget mode's job list hands out its last job first, random polling its first: resumed in the
/// other mode, the jobs the checkpoint's run would have taken next came last (a branch and bound
/// then searched its least promising subtrees first, with a poor incumbent: 15 to 60 times the
/// nodes).
fn jobs_in_order(mut jobs: Vec<Pending>, saved_by: &StoredMode, polling: bool) -> Vec<Pending> {
    if matches!(saved_by, StoredMode::Polling { .. }) != polling {
        jobs.reverse();
    }
    jobs
}

/// How the run ended, and its summary; or how it broke off, with the summary of what it did.
fn finished_or_broke(
    result: io::Result<Outcome>,
    run: &dyn RunView,
    hooks: Hooks<'_>,
    searcher: &dyn Searcher,
    rendezvous_end: Option<crate::remote::FinishedMark>,
) -> Result<Finished, RunError> {
    match result {
        Ok(outcome) => Ok(Finished { _rendezvous_end: rendezvous_end, ..finished(outcome, run, hooks, searcher)? }),
        Err(error) => {
            // A stop for a failure: the summary says `failed`, not complete.
            let done = finished(Outcome::Stopped(StopReason::JobFailed), run, hooks, searcher)?;
            let (summary, unsaved) = (done.summary, done.unsaved);
            Err(RunError::Broke(Box::new(BrokeOff { error, summary, unsaved, _rendezvous_end: rendezvous_end })))
        }
    }
}

/// How the run ended, and its summary.
fn finished(
    outcome: Outcome,
    run: &dyn RunView,
    hooks: Hooks<'_>,
    searcher: &dyn Searcher,
) -> Result<Finished, RunError> {
    tracing::info!(outcome = crate::summary::outcome_name(&outcome), "the run ends");
    let saver = &hooks.saver;
    // Checkpoints hold usable times only, so the sum is one a Duration can take. The run's time
    // ends with its driver: saying goodbye to remote workers is not part of it.
    let ended = hooks.ended.unwrap_or_else(Instant::now);
    let (elapsed_s, segments) = saver.before.with(ended.saturating_duration_since(saver.started));
    // A resumed run starts from the final checkpoint's time: the summary must not say more.
    let elapsed = Duration::from_secs_f64(saver.final_elapsed_s.get().unwrap_or(elapsed_s));
    let mut summary = Summary::new(&saver.tree.command_line(), &outcome, run, elapsed, segments);
    summary.tree_totals = searcher.counters().map(|c| TreeTotals::new(c, &run.totals().counters));
    summary.best = BestSummary::of(searcher.optimises(), run.totals(), run.searched_all());
    summary.target = saver.options.scheduler.optimum.target;
    summary.mixed_modes = saver.before.mixed_modes;
    if saver.options.count_only {
        // A branch and bound's best records are counted in the output's length, which a resumed
        // run cuts them back by; nothing was written.
        summary.totals.output_bytes = 0;
    }
    let checkpoint_error = hooks.last_save_failed;
    let checkpoint = saver.options.checkpoint.clone().filter(|_| checkpoint_error.is_none());
    let (t, o) = (run.totals(), saver.options);
    let on_stdout = o.output_path.is_none() && !o.count_only;
    let unsaved = saver.saved.get().filter(|_| checkpoint.is_some()).map(|(nodes, outputs)| Unsaved {
        nodes: t.nodes.saturating_sub(nodes),
        printed: if on_stdout { t.outputs.saturating_sub(outputs) } else { 0 },
    });
    let unsaved = unsaved.filter(|u| u.nodes > 0 || u.printed > 0);
    Ok(Finished { outcome, summary, checkpoint, checkpoint_error, unsaved, _rendezvous_end: None })
}

/// The driver's deadlines and timers, from the run's options.
fn drive_options(options: &RunOptions, started: Instant, workers_may_join: bool) -> DriveOptions {
    DriveOptions {
        deadline: options.time_limit.map(|t| started + t),
        stop_file: options.stop_file.clone(),
        checkpoint_every: options.checkpoint_every.filter(|_| options.checkpoint.is_some()),
        snapshot_every: match options.mode {
            RunMode::Polling { .. } => options.listen.as_ref().map(|l| l.snapshot_every),
            RunMode::Budget => None,
        },
        save_on_stop: options.checkpoint.is_some(),
        workers_may_join,
        // Also without a monitor: a stop that waits long on its workers says so.
        tick: Some(TICK),
    }
}

/// What the driver calls back: the checkpoints and the monitor.
struct Hooks<'a> {
    saver: Checkpointer<'a>,
    monitor: Option<Monitor>,
    /// Told when the run stops.
    searcher: Arc<dyn Searcher>,
    /// The run's last checkpoint could not be written: the run still ends with its summary.
    last_save_failed: Option<RunError>,
    /// When the driver returned: the end of the run's time.
    ended: Option<Instant>,
    /// When the run began to stop, until the wait for its workers has been told of.
    stopping_since: Option<Instant>,
    /// The [`Stopper`]s' view of the stop.
    stopping: Arc<AtomicBool>,
}

/// A stop that waits this long for the jobs out with workers says what it waits for.
const STOP_WAIT_SAID_AFTER: Duration = Duration::from_secs(3);

impl<'a> Hooks<'a> {
    fn new(
        tree: &'a TreeSpec,
        options: &'a RunOptions,
        searcher: &Arc<dyn Searcher>,
        (before, nodes_before): (Earlier, u64),
        started: Instant,
        stopping: &Arc<AtomicBool>,
    ) -> Result<Self, RunError> {
        let monitor = match options.monitor.is_active() {
            true => {
                let polling = !matches!(options.mode, RunMode::Budget);
                let monitor = Monitor::new(&options.monitor, searcher, polling, (before.elapsed_s, nodes_before));
                Some(monitor.map_err(RunError::History)?)
            }
            false => None,
        };
        let (saved, final_elapsed_s) = Default::default();
        let saver = Checkpointer {
            tree,
            input_digest: searcher.input_digest(),
            optimises: searcher.optimises(),
            options,
            before,
            started,
            saved,
            final_elapsed_s,
        };
        let searcher = Arc::clone(searcher);
        let stopping = Arc::clone(stopping);
        Ok(Hooks { saver, monitor, searcher, last_save_failed: None, ended: None, stopping_since: None, stopping })
    }
}

impl Observer for Hooks<'_> {
    fn tick(&mut self, scheduler: &dyn RunView) {
        if let Some(m) = &mut self.monitor {
            m.tick(scheduler);
        }
        if self.stopping_since.is_none_or(|at| at.elapsed() < STOP_WAIT_SAID_AFTER) {
            return;
        }
        let busy = scheduler.busy_workers();
        if busy == 0 {
            return;
        }
        self.stopping_since = None;
        let remote = match &self.saver.options.listen {
            Some(l) => {
                let timeout = bts_worker::remote::seconds(l.worker_timeout);
                format!(" (remote workers silent for --worker-timeout, {timeout} s, are dropped)")
            }
            None => String::new(),
        };
        let workers = crate::summary::plural(busy as u64, "workers");
        tracing::warn!("the stop waits for the jobs out with {workers}{remote}");
    }

    fn checkpoint(&mut self, run: &dyn RunView, at: SavePoint) -> io::Result<()> {
        let Some(path) = &self.saver.options.checkpoint else { return Ok(()) };
        match self.saver.write(run, run.pending_jobs(), at) {
            Ok(()) => Ok(()),
            Err(source) if at.last => {
                self.last_save_failed = Some(RunError::Checkpoint { path: path.clone(), source });
                Ok(())
            }
            // A checkpoint that cannot be written leaves the previous one, unless its file or
            // folder went.
            Err(e) => Err(io::Error::new(
                e.kind(),
                match path.is_file() {
                    true => format!("{}: {e}; the previous checkpoint stays valid", path.display()),
                    false => format!(
                        "{}: {e}; no checkpoint is left there (its file or folder is gone): the run cannot be \
                         resumed unless a later save succeeds",
                        path.display()
                    ),
                },
            )),
        }
    }

    fn stopping(&mut self) {
        self.searcher.stopping();
        self.stopping.store(true, Ordering::Relaxed);
        self.stopping_since = Some(Instant::now());
    }

    fn finish(&mut self, scheduler: &dyn RunView) {
        if let Some(m) = &mut self.monitor {
            if let Some(at) = self.saver.final_elapsed_s.get() {
                m.ends_at(at);
            }
            m.finish(scheduler);
        }
    }
}

/// The run before this segment: its seconds and segments, whether it was over already, and whether
/// its segments and this one ran in both modes (then its jobs and steals are counted together).
#[derive(Clone, Copy, Debug, Default)]
struct Earlier {
    elapsed_s: f64,
    segments: u32,
    over: bool,
    mixed_modes: bool,
}

impl Earlier {
    /// The run `checkpoint` holds, carried on in polling mode or not.
    fn of(checkpoint: &Checkpoint, polling: bool) -> Self {
        let other_mode = polling != matches!(checkpoint.options.mode, StoredMode::Polling { .. });
        Earlier {
            elapsed_s: checkpoint.elapsed_s,
            segments: checkpoint.segments,
            over: checkpoint.is_complete(),
            mixed_modes: checkpoint.mixed_modes || other_mode,
        }
    }

    /// The run's seconds and segments with this segment, `this` long: a complete run resumed
    /// adds neither (resuming it changes nothing).
    fn with(self, this: Duration) -> (f64, u32) {
        match self.over {
            true => (self.elapsed_s, self.segments),
            false => (self.elapsed_s + this.as_secs_f64(), self.segments + 1),
        }
    }
}

/// Saves the run to the checkpoint file, if there is one.
struct Checkpointer<'a> {
    tree: &'a TreeSpec,
    /// The digest of the file the tree was read from.
    input_digest: Option<u32>,
    /// The run is a branch and bound.
    optimises: bool,
    options: &'a RunOptions,
    /// The run before this segment.
    before: Earlier,
    started: Instant,
    /// The nodes and records of the run as the last checkpoint written holds them.
    saved: std::cell::Cell<Option<(u64, u64)>>,
    /// The run's seconds as its final checkpoint holds them: the summary says the same.
    final_elapsed_s: std::cell::Cell<Option<f64>>,
}

impl Checkpointer<'_> {
    /// Writes a checkpoint of `run` whose unvisited nodes are `jobs`, taken at `at`.
    fn write(&self, scheduler: &dyn RunView, jobs: Vec<Pending>, at: SavePoint) -> io::Result<()> {
        let Some(path) = &self.options.checkpoint else { return Ok(()) };
        let o = self.options;
        let (elapsed_s, segments) = self.before.with(self.started.elapsed());
        let checkpoint = Checkpoint {
            written_unix_ms: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            tree: self.tree.clone(),
            options: StoredOptions {
                order: o.scheduler.order,
                budget: o.scheduler.budget.clone(),
                count_only: o.count_only,
                output: o.output_path.as_deref().map(|output| stored_output(output, path)),
                checkpoint: o.checkpoint.clone(),
                checkpoint_every: o.checkpoint_every.map(|d| d.as_secs_f64()),
                workers: o.workers as u32,
                mode: match o.mode {
                    RunMode::Budget => StoredMode::Budget,
                    RunMode::Polling { split, .. } => StoredMode::Polling { split },
                },
            },
            totals: scheduler.totals().clone(),
            budget: scheduler.budget().map_or_else(
                || BudgetState { base: o.scheduler.budget.initial, cost: Default::default() },
                |b| b.state().clone(),
            ),
            elapsed_s,
            segments,
            output_len: scheduler.totals().output_bytes,
            jobs,
            seal: at.output_checksum.map(|crc| OutputSeal { crc, ended: at.last }),
            counters: scheduler.totals().counters.clone(),
            optimum: StoredOptimum {
                best: scheduler.totals().best.clone(),
                pruned: scheduler.totals().pruned,
                keep_ties: o.scheduler.optimum.keep_ties,
                best_len: scheduler.totals().best_len,
                optimises: Some(self.optimises),
            },
            input_digest: self.input_digest,
            mixed_modes: self.before.mixed_modes,
        };
        bts_checkpoints::write(path, &checkpoint)?;
        self.saved.set(Some((scheduler.totals().nodes, scheduler.totals().outputs)));
        if at.last {
            self.final_elapsed_s.set(Some(elapsed_s));
        }
        Ok(())
    }
}

/// The output file as a checkpoint at `checkpoint` records it: relative to the checkpoint's folder
/// when it lies in it or below, so that a copy of the folder carries on in the copy.
fn stored_output(output: &Path, checkpoint: &Path) -> PathBuf {
    let folder = checkpoint.parent().unwrap_or(Path::new(""));
    match output.strip_prefix(folder) {
        Ok(inside) if inside.components().all(|c| matches!(c, Component::Normal(_))) => inside.to_path_buf(),
        _ => output.to_path_buf(),
    }
}

struct DisconnectGuard(u64, Sender<Event>);

impl Drop for DisconnectGuard {
    fn drop(&mut self) {
        let _ = self.1.send(Event::Disconnected(self.0));
    }
}
