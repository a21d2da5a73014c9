//! The master's scheduling logic, as a state machine without I/O.
//!
//! The [`Scheduler`] owns the job list L, the budget controller, the jobs out with workers and the
//! committed totals. Drivers (local threads, TCP connections, simulations) feed it events —
//! [`add_worker`](Scheduler::add_worker), [`handle_message`](Scheduler::handle_message),
//! [`handle_disconnect`](Scheduler::handle_disconnect), [`stop`](Scheduler::stop) — and carry out
//! what it asks: messages from [`poll_send`](Scheduler::poll_send) and committed output records
//! from [`output`](Scheduler::output).
//!
//! # Why every node is counted exactly once
//! Every node is in exactly one of three places: L, a job out with a worker (recorded in
//! `in_flight` by its start node), or the committed totals. A job's report moves its start node's
//! subtree share into the totals and its returned nodes into L in one step, and only if the job is
//! still in flight for the worker that reports it; a lost worker's jobs go back to L whole, and
//! whatever that worker did for them is never counted. Output records are committed with their
//! job's report, so they too appear exactly once.

use crate::best::{Best, Incumbents, OptimumConfig};
use crate::budget::{Assignment, BudgetConfig, BudgetController};
use crate::joblist::{JobList, Order, Pending};
use bts_protocol::{Budget, FromWorker, Job, JobFailure, JobId, JobReport, NodeBytes, ReportBatch, ToWorker};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

/// A worker as the scheduler knows it: a local thread, or a remote process with several threads.
pub type WorkerId = u64;

#[derive(Clone, Debug, PartialEq)]
pub struct SchedulerConfig {
    pub order: Order,
    pub budget: BudgetConfig,
    /// Visit at most this many nodes (in this segment of the run), then stop; at least 1.
    pub node_limit: Option<u64>,
    /// How much work to queue ahead at each worker thread, so that it never waits for a round trip.
    /// Zero hands local threads one job at a time (remote ones as many as their round trip needs):
    /// a branch and bound then runs its jobs as near to depth-first order as the threads allow,
    /// each job taking the most promising node left, instead of one queued behind it.
    pub queue_ahead: Duration,
    /// Keep the number of nodes of every committed job, for `--freq`.
    pub record_job_sizes: bool,
    /// A branch and bound's ties and target.
    pub optimum: OptimumConfig,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        Self {
            order: Order::Lifo,
            budget: BudgetConfig::default(),
            node_limit: None,
            queue_ahead: Duration::from_millis(2),
            record_job_sizes: false,
            optimum: OptimumConfig::default(),
        }
    }
}

/// Counters of committed jobs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub nodes: u64,
    /// `None` once a job reported no leaf count.
    pub leaves: Option<u64>,
    /// `None` once a job reported no depth.
    pub max_depth: Option<u32>,
    pub outputs: u64,
    pub jobs: u64,
    /// Nodes added to L besides the root (R_n of Avis & Devroye).
    pub returned: u64,
    /// Bytes of output records committed.
    pub output_bytes: u64,
    /// The tree's own totals (see `JobReport::counters`), summed job by job. Not in the summary's
    /// flat fields: the summary names them ([`crate::RunView`] users get the names from the tree).
    #[serde(skip)]
    pub counters: Vec<u64>,
    /// A branch and bound's best solutions (kept by checkpoints apart, as the counters).
    #[serde(skip)]
    pub best: Option<Best>,
    /// Nodes pruned by a branch and bound.
    #[serde(skip)]
    pub pruned: u64,
    /// Bytes at the end of the output that are a branch and bound's best records, written when
    /// the run completed or reached its target (0 until then): a resumed run takes them back and
    /// writes the best records again when it ends.
    #[serde(skip)]
    pub best_len: u64,
}

impl Default for Totals {
    fn default() -> Self {
        Self {
            nodes: 0,
            leaves: Some(0),
            max_depth: Some(0),
            outputs: 0,
            jobs: 0,
            returned: 0,
            output_bytes: 0,
            counters: Vec::new(),
            best: None,
            pruned: 0,
            best_len: 0,
        }
    }
}

impl Totals {
    /// What a resumed run starts from: a branch and bound's best records, written when the run
    /// ended, are taken back (the output is cut back by `best_len` bytes), and the resumed run
    /// writes its own when it ends.
    pub fn resumed(&self) -> Totals {
        let written = match self.best_len {
            0 => 0,
            _ => self.best.as_ref().map_or(0, |b| b.records.len() as u64),
        };
        Totals {
            outputs: self.outputs.saturating_sub(written),
            output_bytes: self.output_bytes.saturating_sub(self.best_len),
            best_len: 0,
            ..self.clone()
        }
    }
}

/// Why a run stopped before the tree was done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum StopReason {
    NodeLimit,
    TimeLimit,
    StopFile,
    Signal,
    /// A job failed (see [`Outcome::Failed`]).
    JobFailed,
    /// Every worker was lost and none can join.
    NoWorkers,
    /// A branch and bound found a solution that reaches `--target`.
    Target,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every node was visited.
    Complete,
    /// Stopped early; L holds the rest of the tree.
    Stopped(StopReason),
    /// A job failed: the run ends at once. L and the jobs out with workers hold the rest of the
    /// tree, the failed job included.
    Failed(JobFailure),
}

/// A worker broke the protocol; the driver should drop it (its jobs go back to L).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("worker {worker} broke the protocol: {reason}")]
pub struct Violation {
    pub worker: WorkerId,
    pub reason: String,
}

/// A job out with a worker.
#[derive(Clone, Debug)]
struct InFlight {
    worker: WorkerId,
    depth: u32,
    budget: Budget,
    node: NodeBytes,
    /// Where and why the job failed before, if it is tried again elsewhere.
    earlier: Option<Earlier>,
}

/// Where a worker runs: [`Place::LOCAL`] for the master's own threads, one place per remote
/// worker process. A job that fails in one place is tried in another before it fails the run: one
/// host whose set-up is wrong (a program or file missing there) must not fail a run that others
/// can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Place(pub u64);

impl Place {
    pub const LOCAL: Place = Place(0);
}

/// Where a job failed, and how the first time (for the message if it fails the run).
#[derive(Clone, Debug)]
struct Earlier {
    places: Vec<Place>,
    failure: JobFailure,
}

/// A job that failed in this many places fails the run: it is the tree's or the program's fault,
/// not one host's (a run with fewer places fails once it failed in each).
const FAILING_PLACES: usize = 3;

#[derive(Clone, Debug)]
struct WorkerSlot {
    place: Place,
    threads: u32,
    /// Jobs handed out and not yet reported.
    outstanding: u32,
    /// Recent job duration (exponential average), to size the queue ahead.
    job_ns: f64,
    /// Round trip to the worker (zero for local threads).
    rtt_ns: f64,
}

/// The most jobs queued at one thread.
const MAX_QUEUED_PER_THREAD: u32 = 1024;
/// A message of jobs stops growing past this many bytes of nodes (frames have a size limit).
const MAX_MESSAGE_NODE_BYTES: usize = 4 << 20;
/// A job should last at least this many round trips to the farthest worker.
const MIN_JOB_ROUND_TRIPS: f64 = 20.0;

pub struct Scheduler {
    config: SchedulerConfig,
    list: JobList,
    budget: BudgetController,
    incumbents: Incumbents,
    workers: BTreeMap<WorkerId, WorkerSlot>,
    in_flight: HashMap<JobId, InFlight>,
    /// Jobs that failed in one place, for a worker elsewhere.
    retries: Vec<(Pending, Earlier)>,
    /// Places where a job failed that then succeeded elsewhere: they get no more jobs.
    shunned: Vec<Place>,
    /// Budgets of the jobs in flight (for the node limit).
    reserved: u64,
    next_job: u64,
    /// The next job handed out is the run's first (it gets the initial depth limit).
    first_job: bool,
    totals: Totals,
    /// Nodes committed before this segment of the run (a resumed run starts with some).
    nodes_before: u64,
    /// The most jobs L held at once.
    peak_queued: usize,
    /// Nodes of the jobs committed since the last [`clear_job_sizes`](Self::clear_job_sizes).
    job_sizes: Vec<u64>,
    workers_seen: u64,
    outbox: VecDeque<(WorkerId, ToWorker)>,
    output: Vec<u8>,
    stop: Option<StopReason>,
    /// The workers holding jobs have been told that the run stops.
    told_stopping: bool,
    failure: Option<JobFailure>,
    outcome: Option<Outcome>,
    /// A complete run's best records are still to be written ([`Scheduler::write_best`]).
    best_due: bool,
}

impl Scheduler {
    /// A new run from `root`.
    pub fn new(config: SchedulerConfig, root: NodeBytes) -> Self {
        let mut s = Self::with_state(config, Totals::default(), None);
        s.list.extend_dfs([Pending { depth: 0, node: root }]);
        s.first_job = true;
        s
    }

    /// A run that carries on from saved totals and jobs (a resumed checkpoint).
    pub fn resume(
        config: SchedulerConfig,
        totals: Totals,
        budget: Option<crate::budget::BudgetState>,
        jobs: impl IntoIterator<Item = Pending>,
    ) -> Self {
        let mut s = Self::with_state(config, totals, budget);
        for p in jobs {
            s.list.put_back(p);
        }
        // A new target the saved incumbent reaches already.
        if s.incumbents.reached_target() {
            s.stop = Some(StopReason::Target);
        }
        // A complete run, or one stopped already, is over before any worker comes (there may be
        // none: remote workers only).
        s.check_finished();
        s
    }

    fn with_state(config: SchedulerConfig, totals: Totals, budget: Option<crate::budget::BudgetState>) -> Self {
        let controller = match budget {
            Some(state) => BudgetController::resume(config.budget.clone(), state),
            None => BudgetController::new(config.budget.clone()),
        };
        Scheduler {
            list: JobList::new(config.order),
            incumbents: Incumbents::new(config.optimum, totals.best.as_ref()),
            budget: controller,
            config,
            workers: BTreeMap::new(),
            in_flight: HashMap::new(),
            retries: Vec::new(),
            shunned: Vec::new(),
            reserved: 0,
            next_job: 0,
            first_job: false,
            nodes_before: totals.nodes,
            totals,
            peak_queued: 0,
            job_sizes: Vec::new(),
            workers_seen: 0,
            outbox: VecDeque::new(),
            output: Vec::new(),
            stop: None,
            told_stopping: false,
            failure: None,
            outcome: None,
            best_due: false,
        }
    }

    // ----- events -----

    /// A worker with `threads` threads, on this machine, is ready for jobs.
    pub fn add_worker(&mut self, worker: WorkerId, threads: u32) {
        self.add_worker_at(worker, threads, Place::LOCAL);
    }

    /// A worker with `threads` threads, at `place`, is ready for jobs.
    pub fn add_worker_at(&mut self, worker: WorkerId, threads: u32, place: Place) {
        let job_ns = self.config.budget.target_job_ns as f64;
        let slot = WorkerSlot { place, threads: threads.max(1), outstanding: 0, job_ns, rtt_ns: 0.0 };
        self.workers.insert(worker, slot);
        self.workers_seen += u64::from(threads.max(1));
        self.dispatch();
    }

    /// A message from `worker`. On a [`Violation`] nothing of the message is applied; the driver
    /// should drop the worker with [`handle_disconnect`](Self::handle_disconnect).
    pub fn handle_message(&mut self, worker: WorkerId, message: FromWorker) -> Result<(), Violation> {
        let violation = |reason: String| Violation { worker, reason };
        if !self.workers.contains_key(&worker) {
            return Err(violation("message from an unknown worker".into()));
        }
        match message {
            FromWorker::Reports(batch) => self.commit(worker, batch).map_err(violation)?,
            FromWorker::Unstarted(ids) => {
                self.held(worker, &ids).map_err(|m| {
                    violation(match m {
                        Misheld::NotOut(id) => format!("job {} handed back is not out with this worker", id.0),
                        Misheld::Twice => "a job is handed back twice".into(),
                    })
                })?;
                // The last first: with LIFO order the first is handed out first again.
                for &id in ids.iter().rev() {
                    let job = self.take_in_flight(worker, id).expect("checked above");
                    self.put_back(job);
                }
                tracing::debug!(worker, jobs = ids.len(), "jobs not started go back to the job list as the run stops");
                self.dispatch();
            }
            FromWorker::Failed(failure) => {
                let job = self.take_in_flight(worker, failure.id).map_err(violation)?;
                let place = self.workers.get(&worker).map_or(Place::LOCAL, |s| s.place);
                let mut places = job.earlier.as_ref().map_or_else(Vec::new, |e| e.places.clone());
                places.push(place);
                let may_retry = !failure.given_up && places.len() < FAILING_PLACES && self.stop.is_none();
                // Only barred workers could try it: failures that come and go (a flaky host)
                // barred them; they get jobs again rather than the run failing for it.
                let untried = self.workers.values().any(|s| !places.contains(&s.place));
                if may_retry && untried && !self.elsewhere(&places) {
                    tracing::warn!("no other worker gets jobs: the workers where jobs failed get jobs again");
                    self.shunned.clear();
                }
                if may_retry && self.elsewhere(&places) {
                    tracing::warn!(worker, node = %failure.node, "the job failed ({}); it is tried on a worker elsewhere", failure.message);
                    let first = job.earlier.as_ref().map_or(failure, |e| e.failure.clone());
                    self.retries
                        .push((Pending { depth: job.depth, node: job.node }, Earlier { places, failure: first }));
                    self.dispatch();
                    return Ok(());
                }
                let earlier = job.earlier.clone();
                self.put_back(job);
                if failure.given_up {
                    // A try that would have been made again, but for the stop of the run or of the
                    // worker (one that leaves): another worker, or a resumed run, makes it.
                    tracing::warn!(
                        worker,
                        node = %failure.node,
                        "job given up as the run or its worker stops; it goes back to the job list: {}",
                        failure.message
                    );
                } else {
                    let mut failure = failure;
                    if let Some(earlier) = earlier {
                        let before = earlier.failure.message;
                        let elsewhere = match earlier.places.len() {
                            1 => "elsewhere".to_string(),
                            n => format!("on {n} other machines; the first time"),
                        };
                        failure.message = format!("{}; it had failed {elsewhere} too: {before}", failure.message);
                    }
                    let _worker = tracing::error_span!("", worker).entered();
                    self.fail(failure, "a job failed");
                }
            }
        }
        self.dispatch();
        Ok(())
    }

    /// Fails the run. The first failure is the run's error, which its end reports in full: the log
    /// says only `what` happened; a later one is logged with its message.
    fn fail(&mut self, failure: JobFailure, what: &str) {
        // A failure that names no node logs no `node` field (`None` records nothing).
        let node = (!failure.node.is_empty()).then(|| tracing::field::display(&failure.node));
        match self.failure {
            None => tracing::error!(node, "{what}; the run stops"),
            Some(_) => tracing::error!(node, "{what} too: {}", failure.message),
        }
        self.failure.get_or_insert(failure);
        self.stop.get_or_insert(StopReason::JobFailed);
    }

    /// `worker` is gone: its jobs go back to L, and nothing it did for them counts.
    pub fn handle_disconnect(&mut self, worker: WorkerId) {
        let jobs = self.take_back(worker);
        if jobs > 0 {
            tracing::warn!(worker, jobs, "worker lost; its jobs go back to the job list");
        }
    }

    /// `worker` left the run when told to stop, after reporting the jobs it ran: those queued
    /// for it go back to L.
    pub fn handle_leave(&mut self, worker: WorkerId) {
        let jobs = self.take_back(worker);
        tracing::info!(worker, jobs, "worker left; the jobs queued for it go back to the job list");
    }

    /// Puts `worker`'s jobs back in L; returns how many.
    fn take_back(&mut self, worker: WorkerId) -> usize {
        if self.workers.remove(&worker).is_none() {
            return 0;
        }
        let mut lost: Vec<(JobId, InFlight)> =
            self.in_flight.iter().filter(|(_, j)| j.worker == worker).map(|(&id, j)| (id, j.clone())).collect();
        // Put the oldest back last, so that with LIFO order it is handed out first.
        lost.sort_by_key(|&(id, _)| std::cmp::Reverse(id));
        let jobs = lost.len();
        for (id, job) in lost {
            self.in_flight.remove(&id);
            self.reserved = self.reserved.saturating_sub(job.budget.0);
            self.put_back(job);
        }
        self.dispatch();
        jobs
    }

    /// The round trip to `worker` was measured: queue enough work ahead to cover it, and keep jobs
    /// long against it.
    pub fn set_latency(&mut self, worker: WorkerId, rtt: std::time::Duration) {
        if let Some(slot) = self.workers.get_mut(&worker) {
            // A worker stopped for a while (Ctrl-Z, a loaded host) answers one ping seconds late:
            // taken whole, that round trip made jobs and the work queued for it 5 times as long
            // for a moment. The estimate rises at most twofold a ping (a slower network is
            // followed within a few) and falls at once.
            let measured = rtt.as_nanos() as f64;
            slot.rtt_ns = if slot.rtt_ns > 0.0 { measured.min(slot.rtt_ns * 2.0) } else { measured };
        }
        let slowest = self.workers.values().map(|w| w.rtt_ns).fold(0.0, f64::max);
        self.budget.set_min_job_ns((slowest * MIN_JOB_ROUND_TRIPS) as u64);
    }

    /// Stop handing out jobs; the run ends once the jobs out with workers are reported.
    pub fn stop(&mut self, reason: StopReason) {
        self.stop.get_or_insert(reason);
        self.dispatch();
    }

    /// Whether the run was told to stop, or stops for a reason of its own.
    pub fn stopping(&self) -> bool {
        self.stop.is_some()
    }

    // ----- outputs -----

    /// The next message to deliver.
    pub fn poll_send(&mut self) -> Option<(WorkerId, ToWorker)> {
        self.outbox.pop_front()
    }

    /// Committed output records not yet written; the driver writes them, then calls
    /// [`clear_output`](Self::clear_output).
    pub fn output(&self) -> &[u8] {
        &self.output
    }

    pub fn clear_output(&mut self) {
        self.output.clear();
    }

    /// Whether a complete run's best records are still to be written (a branch and bound that
    /// found a solution).
    pub fn best_due(&self) -> bool {
        self.best_due && self.totals.best.is_some()
    }

    /// Writes a complete run's best records to the output, once.
    pub fn write_best(&mut self) {
        if std::mem::take(&mut self.best_due) {
            self.incumbents.write(&mut self.totals, &mut self.output);
        }
    }

    /// How the run ended, once it has.
    pub fn outcome(&self) -> Option<&Outcome> {
        self.outcome.as_ref()
    }

    // ----- state for reports and checkpoints -----

    pub fn clear_job_sizes(&mut self) {
        self.job_sizes.clear();
    }

    pub fn threads(&self) -> usize {
        self.workers.values().map(|w| w.threads as usize).sum()
    }

    pub fn budget(&self) -> &BudgetController {
        &self.budget
    }

    // ----- internals -----

    /// The run has a worker away from `place` that may take jobs.
    fn elsewhere(&self, places: &[Place]) -> bool {
        self.workers.values().any(|s| !places.contains(&s.place) && !self.shunned.contains(&s.place))
    }

    /// A job that failed in `earlier.places` succeeded elsewhere: those places get no more jobs,
    /// and their workers are told why.
    fn bar(&mut self, earlier: &Earlier) {
        let (node, why) = (&earlier.failure.node, &earlier.failure.message);
        for &place in &earlier.places {
            if self.shunned.contains(&place) {
                continue;
            }
            let which = match place {
                Place::LOCAL => "the master's own threads get no more jobs (check this host's set-up)",
                _ => "the remote worker where it failed gets no more jobs (check its host's set-up, and stop it)",
            };
            tracing::error!("the job at node {node} failed and then succeeded on another worker: {which}: {why}");
            self.shunned.push(place);
            let told = format!("the job at node {node} failed here and succeeded on another worker: {why}");
            for (&id, _) in self.workers.iter().filter(|(_, s)| s.place == place) {
                self.outbox.push_back((id, ToWorker::Barred(told.clone())));
            }
        }
    }

    /// A job out with a worker that is gone goes back where it came from: a retry to the retries,
    /// where it keeps why it failed.
    fn put_back(&mut self, job: InFlight) {
        let pending = Pending { depth: job.depth, node: job.node };
        match job.earlier {
            None => self.list.put_back(pending),
            Some(earlier) => self.retries.push((pending, earlier)),
        }
    }

    fn take_in_flight(&mut self, worker: WorkerId, id: JobId) -> Result<InFlight, String> {
        match self.in_flight.get(&id) {
            Some(job) if job.worker == worker => {}
            Some(_) => return Err(format!("job {} belongs to another worker", id.0)),
            None => return Err(format!("job {} is not out with this worker", id.0)),
        }
        let job = self.in_flight.remove(&id).expect("checked above");
        self.reserved = self.reserved.saturating_sub(job.budget.0);
        if let Some(slot) = self.workers.get_mut(&worker) {
            slot.outstanding -= 1;
        }
        Ok(job)
    }

    /// Checks that the jobs `ids` a worker names are out with it, each named once.
    fn held(&self, worker: WorkerId, ids: &[JobId]) -> Result<(), Misheld> {
        if let Some(&id) = ids.iter().find(|id| self.in_flight.get(id).is_none_or(|job| job.worker != worker)) {
            return Err(Misheld::NotOut(id));
        }
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        match sorted.windows(2).any(|w| w[0] == w[1]) {
            true => Err(Misheld::Twice),
            false => Ok(()),
        }
    }

    /// Checks a whole batch, then commits it.
    fn commit(&mut self, worker: WorkerId, batch: ReportBatch) -> Result<(), String> {
        batch.validate().map_err(|e| e.to_string())?;
        let ids: Vec<JobId> = batch.reports.iter().map(|r| r.id).collect();
        self.held(worker, &ids).map_err(|m| match m {
            Misheld::NotOut(id) => format!("report for job {} which is not out with this worker", id.0),
            Misheld::Twice => "a job is reported twice".into(),
        })?;
        for r in &batch.reports {
            check_report(r, self.in_flight[&r.id].depth)?;
        }
        if let Some(id) = self.overflowing(&batch.reports) {
            // A misreport (a legacy program's `done 18446744073709551615`, say): the job fails, and
            // the batch's other jobs go back to L with it, as the run stops.
            for r in &batch.reports {
                let job = self.take_in_flight(worker, r.id)?;
                self.put_back(job);
            }
            // The node is in L again, as bytes only the tree could read: the failure names none.
            let message = format!(
                "the report of job {} would overflow the run's totals (2^64 nodes, records, bytes or pruned \
                 nodes): the worker or program misreports",
                id.0
            );
            let _worker = tracing::error_span!("", worker).entered();
            self.fail(JobFailure::new(id, "", message), "a job's report misreports");
            return Ok(());
        }

        let ReportBatch { reports, returned, output, solutions } = batch;
        self.take_solutions(solutions);
        let mut returned = returned.into_iter();
        let mut output_at = 0usize;
        for r in reports {
            let job = self.in_flight.remove(&r.id).expect("checked above");
            self.reserved = self.reserved.saturating_sub(job.budget.0);
            if let Some(earlier) = &job.earlier {
                self.bar(earlier);
            }
            let t = &mut self.totals;
            t.nodes += r.visited;
            // A job whose own node was pruned visited nothing: it has no leaves or depths to tell
            // (a legacy program's `done 0 pruned=1` says none).
            if r.visited > 0 {
                t.leaves = t.leaves.zip(r.leaves).map(|(a, b)| a + b);
                t.max_depth = t.max_depth.zip(r.max_depth).map(|(a, b)| a.max(b));
            }
            t.outputs += r.outputs;
            t.jobs += 1;
            t.returned += u64::from(r.returned);
            t.pruned += r.pruned;
            add_counters(&mut t.counters, &r.counters);
            let end = output_at + r.output_bytes as usize;
            self.output.extend_from_slice(&output[output_at..end]);
            t.output_bytes += r.output_bytes;
            output_at = end;
            self.list.extend_dfs(returned.by_ref().take(r.returned as usize).map(Pending::from).collect::<Vec<_>>());
            self.budget.observe(r.visited, r.elapsed_ns);
            if self.config.record_job_sizes {
                self.job_sizes.push(r.visited);
            }
            if let Some(slot) = self.workers.get_mut(&worker) {
                slot.outstanding -= 1;
                slot.job_ns = slot.job_ns * 0.9 + r.elapsed_ns as f64 * 0.1;
            }
        }
        Ok(())
    }

    /// Takes a batch's solutions: an improvement goes to every worker at once, and one that
    /// reaches the target stops the run.
    fn take_solutions(&mut self, solutions: Vec<bts_protocol::Solution>) {
        if solutions.is_empty() || !self.incumbents.offer(solutions, &mut self.totals.best) {
            return;
        }
        let incumbent = self.incumbents.incumbent();
        tracing::debug!(value = incumbent.value, "a better solution");
        for &id in self.workers.keys() {
            self.outbox.push_back((id, ToWorker::Incumbent(incumbent)));
        }
        if self.incumbents.reached_target() {
            tracing::info!(value = incumbent.value, "the target is reached: stopping");
            self.stop.get_or_insert(StopReason::Target);
        }
    }

    /// The first of `reports` that would make a total overflow.
    fn overflowing(&self, reports: &[JobReport]) -> Option<JobId> {
        let t = &self.totals;
        let mut sums = [t.nodes, t.leaves.unwrap_or(0), t.outputs, t.output_bytes, t.pruned];
        let mut counters = t.counters.clone();
        for r in reports {
            let adds = [r.visited, r.leaves.unwrap_or(0), r.outputs, r.output_bytes, r.pruned];
            counters.resize(counters.len().max(r.counters.len()), 0);
            let sums = sums.iter_mut().zip(adds).chain(counters.iter_mut().zip(r.counters.iter().copied()));
            for (sum, add) in sums {
                *sum = match sum.checked_add(add) {
                    Some(s) => s,
                    None => return Some(r.id),
                };
            }
        }
        None
    }

    /// Nodes that may still be given out as budgets under the node limit.
    fn remaining_budget(&self) -> u64 {
        match self.config.node_limit {
            Some(limit) => {
                let done = self.totals.nodes - self.nodes_before;
                limit.saturating_sub(done).saturating_sub(self.reserved)
            }
            None => u64::MAX,
        }
    }

    fn next_assignment(&mut self, depth: u32) -> Assignment {
        if std::mem::take(&mut self.first_job) {
            self.budget.first_job()
        } else {
            // mts's L is every job not being worked on: the list and the jobs queued ahead at
            // workers (beyond one running per thread). Counting the list alone would see a
            // starving list whenever the queues ahead hold its jobs, and cut budgets for nothing.
            let threads = self.threads();
            let queued_ahead = self.in_flight.len().saturating_sub(threads);
            self.budget.assign(depth, self.list.len() + queued_ahead, threads)
        }
    }

    /// Hands out jobs: first one to every idle thread, then the queues ahead.
    fn dispatch(&mut self) {
        if self.outcome.is_some() {
            return;
        }
        self.peak_queued = self.peak_queued.max(self.list.len() + self.retries.len());
        // With only barred workers left (the others gone), the bar is lifted: a job that fails
        // there then fails the run, as it would have with no other machine, instead of the run
        // waiting for ever on workers it gives nothing to.
        let work = !self.list.is_empty() || !self.retries.is_empty();
        if work && !self.shunned.is_empty() && self.workers.values().all(|s| self.shunned.contains(&s.place)) {
            tracing::warn!("only workers where jobs failed are left: they get jobs again");
            self.shunned.clear();
        }
        // A job that failed somewhere and has no worker elsewhere left fails the run, as it would
        // have at once with no worker elsewhere.
        if let Some(i) = self.retries.iter().position(|(_, e)| !self.elsewhere(&e.places)) {
            let (pending, earlier) = self.retries.remove(i);
            self.list.put_back(pending);
            self.fail(earlier.failure, "a job failed, and no worker elsewhere is left to try it");
        }
        let waiting = self.list.len() + self.retries.len();
        if self.stop.is_none() && waiting > 0 && self.remaining_budget() == 0 && self.in_flight.is_empty() {
            self.stop = Some(StopReason::NodeLimit);
        }
        if self.stop.is_some() && !self.told_stopping {
            self.told_stopping = true;
            // Their jobs should end soon: no retries of a legacy program's failed job.
            for (&id, slot) in &self.workers {
                if slot.outstanding > 0 {
                    self.outbox.push_back((id, ToWorker::Stopping));
                }
            }
        }
        if self.stop.is_none() {
            let ids: Vec<WorkerId> = self.workers.keys().copied().collect();
            for fill_queue in [false, true] {
                // A job queued ahead waits for its worker's current job, however long: queue
                // ahead only from a list that can spare a job for each thread, so that near the end
                // no job waits behind a long one while another thread has nothing to do.
                if fill_queue && self.list.len() < self.threads() {
                    break;
                }
                for &id in &ids {
                    let slot = &self.workers[&id];
                    if self.shunned.contains(&slot.place) {
                        continue;
                    }
                    let want = if fill_queue { self.queue_target(slot) } else { slot.threads };
                    let want = want.saturating_sub(slot.outstanding);
                    self.send_jobs(id, want);
                }
            }
        }
        self.check_finished();
    }

    fn queue_target(&self, slot: &WorkerSlot) -> u32 {
        let ahead = (self.config.queue_ahead.as_nanos() as f64 + slot.rtt_ns) / slot.job_ns.max(1.0);
        let least = if self.config.queue_ahead.is_zero() { 1.0 } else { 2.0 };
        let per_thread = (1.0 + ahead.ceil()).clamp(least, MAX_QUEUED_PER_THREAD as f64) as u32;
        per_thread * slot.threads
    }

    fn send_jobs(&mut self, worker: WorkerId, want: u32) {
        let mut jobs = Vec::new();
        let mut bytes = 0;
        let place = self.workers.get(&worker).map_or(Place::LOCAL, |s| s.place);
        while jobs.len() < want as usize && bytes < MAX_MESSAGE_NODE_BYTES {
            let remaining = self.remaining_budget();
            if remaining == 0 {
                break;
            }
            // A job that failed elsewhere first, to settle soon whether that place can work.
            let (pending, earlier) = match self.retries.iter().position(|(_, e)| !e.places.contains(&place)) {
                Some(i) => {
                    let (pending, earlier) = self.retries.remove(i);
                    (pending, Some(earlier))
                }
                None => match self.list.pop() {
                    Some(pending) => (pending, None),
                    None => break,
                },
            };
            let a = self.next_assignment(pending.depth);
            let budget = Budget(a.budget.0.min(remaining).max(1));
            let id = JobId(self.next_job);
            self.next_job += 1;
            self.reserved = self.reserved.saturating_add(budget.0);
            bytes += pending.node.len();
            let node = pending.node.clone();
            self.in_flight.insert(id, InFlight { worker, depth: pending.depth, budget, node, earlier });
            let incumbent = self.incumbents.incumbent();
            jobs.push(Job { id, depth: pending.depth, budget, max_depth: a.max_depth, node: pending.node, incumbent });
        }
        if !jobs.is_empty() {
            if let Some(slot) = self.workers.get_mut(&worker) {
                slot.outstanding += jobs.len() as u32;
            }
            self.outbox.push_back((worker, ToWorker::Jobs(jobs)));
        }
    }

    fn check_finished(&mut self) {
        if self.outcome.is_some() {
            return;
        }
        // A failed job ends the run at once: the jobs out with workers would only hold up the
        // error (a hung program, until its timeout), and the checkpoint keeps them.
        let outcome = if let Some(failure) = &self.failure {
            Outcome::Failed(failure.clone())
        } else if !self.in_flight.is_empty() {
            return;
        } else if self.list.is_empty() && self.retries.is_empty() {
            Outcome::Complete
        } else if let Some(reason) = self.stop {
            Outcome::Stopped(reason)
        } else {
            return;
        };
        // A stopped run writes its best so far (its summary says it is not proven optimal): a
        // resumed run takes it back and writes its own. A complete run's are written once it is
        // saved without them, so that an output that cannot take them leaves a run that resumes
        // to write them, not to search again.
        match outcome {
            Outcome::Stopped(_) => self.incumbents.write(&mut self.totals, &mut self.output),
            Outcome::Complete => self.best_due = true,
            Outcome::Failed(_) => {}
        }
        self.outcome = Some(outcome);
        for &id in self.workers.keys() {
            self.outbox.push_back((id, ToWorker::Finish));
        }
    }
}

/// Adds a job's tree counters to the totals, position by position.
fn add_counters(totals: &mut Vec<u64>, job: &[u64]) {
    if totals.len() < job.len() {
        totals.resize(job.len(), 0);
    }
    for (t, c) in totals.iter_mut().zip(job) {
        *t += c;
    }
}

/// What is wrong with the jobs a worker names (see `Scheduler::held`).
enum Misheld {
    NotOut(JobId),
    Twice,
}

/// A report must describe a plausible run of its job. Budgets are soft: a job may visit more nodes
/// than its budget (legacy programs such as lrs finish what they started), and counts what it
/// visited; but it must visit its own node, unless a branch and bound pruned it, and no more of
/// them can be leaves, nor can the deepest lie above the job's node.
fn check_report(r: &JobReport, depth: u32) -> Result<(), String> {
    let id = r.id.0;
    if r.visited == 0 && r.pruned == 0 {
        return Err(format!("job {id} reports no visited node (its start node would be lost)"));
    }
    if let Some(leaves) = r.leaves.filter(|&l| l > r.visited) {
        return Err(format!("job {id} reports {leaves} leaves among {} visited nodes", r.visited));
    }
    if let Some(deepest) = r.max_depth.filter(|&d| d < depth && r.visited > 0) {
        return Err(format!("job {id} reports its deepest node at depth {deepest}, above its own at {depth}"));
    }
    Ok(())
}

impl crate::view::RunView for Scheduler {
    fn mode(&self) -> &'static str {
        "budget"
    }

    fn totals(&self) -> &Totals {
        &self.totals
    }

    fn queued(&self) -> usize {
        self.list.len() + self.retries.len()
    }

    fn searched_all(&self) -> bool {
        self.outcome == Some(Outcome::Complete)
    }

    fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn workers(&self) -> usize {
        self.workers.len()
    }

    fn busy_workers(&self) -> usize {
        self.workers.values().filter(|w| w.outstanding > 0).count()
    }

    fn workers_seen(&self) -> u64 {
        self.workers_seen
    }

    fn budget(&self) -> Option<&BudgetController> {
        Some(&self.budget)
    }

    fn order(&self) -> Option<Order> {
        Some(self.list.order())
    }

    fn peak_queued(&self) -> usize {
        self.peak_queued
    }

    /// Every job not yet committed: those in L and those out with workers (by their start nodes).
    fn pending_jobs(&self) -> Vec<Pending> {
        let mut out: Vec<(JobId, Pending)> =
            self.in_flight.iter().map(|(&id, j)| (id, Pending { depth: j.depth, node: j.node.clone() })).collect();
        out.sort_by_key(|&(id, _)| std::cmp::Reverse(id));
        let mut jobs: Vec<Pending> = self.list.iter().cloned().collect();
        jobs.extend(self.retries.iter().map(|(p, _)| p.clone()));
        jobs.extend(out.into_iter().map(|(_, p)| p));
        jobs
    }

    fn pending_at(&self, i: usize) -> Option<&Pending> {
        self.list.get(i)
    }

    fn out_with_workers(&self) -> Vec<(u32, NodeBytes)> {
        self.in_flight.values().map(|j| (j.depth, j.node.clone())).collect()
    }

    fn job_sizes(&self) -> &[u64] {
        &self.job_sizes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_late_answer_does_not_stretch_jobs() {
        let mut scheduler = Scheduler::new(SchedulerConfig::default(), NodeBytes::from_slice(b"root"));
        scheduler.add_worker(1, 1);
        let rtt = |s: &Scheduler| s.workers[&1].rtt_ns;
        let ms = std::time::Duration::from_millis;
        scheduler.set_latency(1, ms(1));
        assert_eq!(rtt(&scheduler), 1e6);
        scheduler.set_latency(1, ms(5000));
        assert_eq!(rtt(&scheduler), 2e6, "one late answer");
        for _ in 0..12 {
            scheduler.set_latency(1, ms(5000));
        }
        assert_eq!(rtt(&scheduler), 5e9, "a network that became slow");
        scheduler.set_latency(1, ms(1));
        assert_eq!(rtt(&scheduler), 1e6, "and fast again");
    }
}
