//! Deterministic simulation of the scheduler: fake workers run real budgeted searches, take their
//! time, report in batches, die and join, and the run must still count every node exactly once and
//! commit every output record exactly once; a branch and bound must find its exact optimum.

use bts_master::{
    BudgetConfig, BudgetState, OptimumConfig, Order, Outcome, Pending, Place, RunView, Scheduler, SchedulerConfig,
    StopReason, Totals,
};
use bts_protocol::{FromWorker, Job, JobFailure, ReportBatch, ToWorker};
use bts_trees::{Gw, Knapsack, Queens};
use bts_worker::{JobRunner, Limits, RunnerSettings, Searcher, Tree, TreeSearcher, search};
use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};

/// Any tree, with every node's debug form as its output record: exactly-once output is then
/// exactly-once visiting, checkable node by node.
struct Recorded<T>(T);

impl<T: Tree> Tree for Recorded<T> {
    type Node = T::Node;
    type Children<'a> = T::Children<'a>;
    fn root(&self) -> T::Node {
        self.0.root()
    }
    fn children<'a>(&'a self, node: &T::Node, depth: u32) -> T::Children<'a> {
        self.0.children(node, depth)
    }
    fn output(&self, node: &T::Node, depth: u32, out: &mut String) -> bool {
        use std::fmt::Write;
        write!(out, "{depth} {node:?}").unwrap();
        true
    }
}

/// The truth, from one sequential search: totals and sorted records.
fn sequential<T: Tree>(tree: &T) -> (u64, u64, u32, Vec<String>) {
    let mut out = String::new();
    let s = search(tree, tree.root(), 0, Limits::UNLIMITED, &mut out, &mut |_, _| unreachable!());
    let mut records: Vec<String> = out.lines().map(str::to_string).collect();
    records.sort();
    (s.visited, s.leaves, s.max_depth, records)
}

/// A worker thread of a simulated process: its process, runner, queued jobs and unsent batch.
struct FakeWorker {
    process: u64,
    runner: Box<dyn JobRunner>,
    queue: VecDeque<Job>,
    batch: ReportBatch,
}

/// What a checkpoint holds, as far as the scheduler is concerned.
struct Snapshot {
    totals: Totals,
    budget: BudgetState,
    jobs: Vec<Pending>,
}

struct Sim {
    /// A process's searcher: its threads share it (and a branch and bound's incumbent).
    searcher: Box<dyn Fn() -> Box<dyn Searcher>>,
    config: SchedulerConfig,
    scheduler: Scheduler,
    workers: BTreeMap<u64, FakeWorker>,
    next_worker: u64,
    output: Vec<u8>,
    snapshot: Option<Snapshot>,
}

impl Sim {
    /// A run of `tree` with `workers` single-thread processes.
    fn new(tree: Gw, config: SchedulerConfig, workers: usize) -> Sim {
        let mut sim = Sim::with(Box::new(move || Box::new(TreeSearcher::new(Recorded(tree.clone())))), config);
        for _ in 0..workers {
            sim.join(1);
        }
        sim
    }

    fn with(searcher: Box<dyn Fn() -> Box<dyn Searcher>>, config: SchedulerConfig) -> Sim {
        let scheduler = Scheduler::new(config.clone(), searcher().root().unwrap());
        Sim {
            searcher,
            config,
            scheduler,
            workers: BTreeMap::new(),
            next_worker: 0,
            output: Vec::new(),
            snapshot: None,
        }
    }

    /// A process with `threads` workers.
    fn join(&mut self, threads: u64) {
        let searcher = (self.searcher)();
        let process = self.next_worker;
        for _ in 0..threads {
            let id = self.next_worker;
            self.next_worker += 1;
            let runner = searcher.runner(RunnerSettings::default()).unwrap();
            self.workers
                .insert(id, FakeWorker { process, runner, queue: VecDeque::new(), batch: ReportBatch::default() });
            self.scheduler.add_worker(id, 1 + (id % 3) as u32);
        }
        self.deliver();
    }

    fn deliver(&mut self) {
        loop {
            let mut handed_back = Vec::new();
            while let Some((id, message)) = self.scheduler.poll_send() {
                if let Some(w) = self.workers.get_mut(&id) {
                    match message {
                        ToWorker::Jobs(jobs) => w.queue.extend(jobs),
                        ToWorker::Incumbent(incumbent) => w.runner.raise(incumbent),
                        // The first job may be under way; the others go back unstarted.
                        ToWorker::Stopping if w.queue.len() > 1 => {
                            handed_back.push((id, w.queue.drain(1..).map(|j| j.id).collect()));
                        }
                        ToWorker::Finish | ToWorker::Stopping | ToWorker::Barred(_) => {}
                    }
                }
            }
            if handed_back.is_empty() {
                break;
            }
            for (id, jobs) in handed_back {
                self.scheduler.handle_message(id, FromWorker::Unstarted(jobs)).unwrap();
            }
        }
        self.output.extend_from_slice(self.scheduler.output());
        self.scheduler.clear_output();
    }

    /// Worker `id` runs its next job; simulated time is 100 ns a node.
    fn run_one(&mut self, id: u64) {
        let Some(w) = self.workers.get_mut(&id) else {
            return;
        };
        let Some(job) = w.queue.pop_front() else {
            return;
        };
        w.runner.run(&job, &mut w.batch).unwrap();
        let report = w.batch.reports.last_mut().unwrap();
        report.elapsed_ns = report.visited * 100;
    }

    fn flush(&mut self, id: u64) {
        let Some(w) = self.workers.get_mut(&id) else {
            return;
        };
        if w.batch.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut w.batch);
        self.scheduler.handle_message(id, FromWorker::Reports(batch)).unwrap();
        self.deliver();
    }

    /// Worker `id` fails its next job, after sending its reports (as a legacy program's job fails
    /// past its retries, or is `given_up` as its worker stops); false if it has no job.
    fn fail(&mut self, id: u64, given_up: bool) -> bool {
        self.flush(id);
        let Some(job) = self.workers.get_mut(&id).and_then(|w| w.queue.pop_front()) else {
            return false;
        };
        let failure = JobFailure { id: job.id, node: format!("{:?}", job.node), message: "it failed".into(), given_up };
        self.scheduler.handle_message(id, FromWorker::Failed(failure)).unwrap();
        self.deliver();
        true
    }

    /// Worker `id`'s process dies: none of its threads' unsent batches arrive.
    fn kill(&mut self, id: u64) {
        let Some(process) = self.workers.get(&id).map(|w| w.process) else { return };
        let doomed: Vec<u64> = self.workers.iter().filter(|(_, w)| w.process == process).map(|(&i, _)| i).collect();
        for i in doomed {
            self.workers.remove(&i);
            self.scheduler.handle_disconnect(i);
        }
        self.deliver();
    }

    /// Saves the scheduler's state, as the driver does for a checkpoint.
    fn checkpoint(&mut self) {
        let s = &self.scheduler;
        self.snapshot =
            Some(Snapshot { totals: s.totals().clone(), budget: s.budget().state().clone(), jobs: s.pending_jobs() });
    }

    /// The master dies with all its workers; a new one carries on from the last checkpoint, with
    /// the output cut back to the checkpoint's committed length, and as many workers as before.
    fn crash_and_resume(&mut self) {
        let Some(snap) = &self.snapshot else { return };
        let workers = self.workers.len().max(1);
        self.workers.clear();
        // A branch and bound's best records, written when the run ended, are taken back.
        let totals = snap.totals.resumed();
        self.output.truncate(totals.output_bytes as usize);
        self.scheduler = Scheduler::resume(self.config.clone(), totals, Some(snap.budget.clone()), snap.jobs.clone());
        for _ in 0..workers {
            self.join(1);
        }
    }

    /// Plays `actions` until the run ends: workers run jobs and report them, processes die and
    /// join (of `threads(n)` workers), the master takes checkpoints and crashes.
    fn play(&mut self, actions: Vec<(u8, usize)>, threads: impl Fn(usize) -> u64) {
        for (action, n) in actions {
            let Some(id) = self.nth_worker(n) else {
                self.join(threads(n));
                continue;
            };
            match action {
                0..=5 => self.run_one(id),
                6..=7 => self.flush(id),
                8 => self.kill(id),
                9 => self.join(threads(n)),
                10 => self.checkpoint(),
                _ => self.crash_and_resume(),
            }
            if self.scheduler.outcome().is_some() {
                break;
            }
        }
    }

    fn nth_worker(&self, n: usize) -> Option<u64> {
        let ids: Vec<u64> = self.workers.keys().copied().collect();
        (!ids.is_empty()).then(|| ids[n % ids.len()])
    }

    /// Lets every worker work until the run ends.
    fn finish(&mut self) -> Outcome {
        if self.workers.is_empty() {
            self.join(1);
        }
        let mut rounds = 0;
        while self.scheduler.outcome().is_none() {
            rounds += 1;
            assert!(rounds < 10_000_000, "the run does not end");
            let ids: Vec<u64> = self.workers.keys().copied().collect();
            for id in ids {
                self.run_one(id);
                self.flush(id);
            }
        }
        // As the driver does once the run is saved.
        self.scheduler.write_best();
        self.output.extend_from_slice(self.scheduler.output());
        self.scheduler.clear_output();
        self.scheduler.outcome().unwrap().clone()
    }

    fn records(&self) -> Vec<String> {
        let mut r: Vec<String> = String::from_utf8(self.output.clone()).unwrap().lines().map(str::to_string).collect();
        r.sort();
        r
    }
}

fn config_strategy() -> impl Strategy<Value = SchedulerConfig> {
    (
        1u64..60,
        any::<bool>(),
        prop_oneof![Just(Order::Lifo), Just(Order::Fifo)],
        proptest::option::of(0u32..3),
        proptest::option::of(1.0f64..4.0),
        proptest::option::of(0u32..3),
        2u64..20,
    )
        .prop_map(|(initial, fixed, order, maxd, lmax, initial_depth, scale)| SchedulerConfig {
            order,
            budget: BudgetConfig {
                initial,
                fixed,
                scale,
                lmax,
                maxd,
                initial_depth,
                target_job_ns: 20_000,
                ..BudgetConfig::default()
            },
            ..SchedulerConfig::default()
        })
}

/// Seeds of gw trees (Δ = 3) with a few hundred to a few thousand nodes.
const SEEDS: [u64; 6] = [1, 5, 17, 23, 42, 77];

fn gw(seed_index: usize) -> Gw {
    // Pick the first seed at or after SEEDS[i] whose tree has 200..20000 nodes.
    (SEEDS[seed_index % SEEDS.len()]..)
        .map(|s| Gw::new(3, s))
        .find(|g| (200..20_000).contains(&sequential(g).0))
        .unwrap()
}

/// How many subsets of the items are packings of value `optimum`, by brute force.
fn optimal_packings(capacity: u64, items: &[(u64, u64)], optimum: i64) -> u64 {
    let sum = |set: u32, f: fn(&(u64, u64)) -> u64| {
        (0..items.len()).filter(|i| set >> i & 1 == 1).map(|i| f(&items[i])).sum::<u64>()
    };
    (0..1u32 << items.len()).filter(|&set| sum(set, |i| i.1) <= capacity && sum(set, |i| i.0) as i64 == optimum).count()
        as u64
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Workers run, report, die and join in any order, checkpoints are taken at any moment and the
    /// master crashes and resumes from the last one: the totals are exact and every node's record is
    /// committed exactly once.
    #[test]
    fn every_node_counted_once_whatever_the_schedule(
        tree in 0usize..6,
        config in config_strategy(),
        workers in 1usize..4,
        actions in proptest::collection::vec((0u8..12, any::<usize>()), 0..400),
    ) {
        let (nodes, leaves, depth, records) = sequential(&Recorded(gw(tree)));
        let mut sim = Sim::new(gw(tree), config, workers);
        sim.play(actions, |_| 1);
        prop_assert_eq!(sim.finish(), Outcome::Complete);
        let t = sim.scheduler.totals();
        prop_assert_eq!((t.nodes, t.leaves, t.max_depth, t.outputs), (nodes, Some(leaves), Some(depth), nodes));
        prop_assert_eq!(sim.records(), records);
        prop_assert_eq!(sim.scheduler.in_flight(), 0);
    }

    /// A failed job ends the run at once, whatever other workers still have out: the checkpoint
    /// then taken (the job list and the jobs out, the failed one among them) carries the run on
    /// to its exact totals.
    #[test]
    fn a_failed_job_ends_the_run_at_once_and_its_checkpoint_resumes_exactly(
        tree in 0usize..6,
        config in config_strategy(),
        actions in proptest::collection::vec((0u8..8, any::<usize>()), 0..200),
        victim in any::<usize>(),
    ) {
        let (nodes, leaves, depth, records) = sequential(&Recorded(gw(tree)));
        let mut sim = Sim::new(gw(tree), config, 3);
        sim.play(actions, |_| 1);
        let ids: Vec<u64> = (0..3).filter_map(|k| sim.nth_worker(victim.wrapping_add(k))).collect();
        let failed = ids.into_iter().any(|id| sim.fail(id, false));
        if !failed {
            return Ok(());
        }
        prop_assert!(matches!(sim.scheduler.outcome(), Some(Outcome::Failed(_))), "{:?}", sim.scheduler.outcome());
        sim.checkpoint();
        sim.crash_and_resume();
        prop_assert_eq!(sim.finish(), Outcome::Complete);
        let t = sim.scheduler.totals();
        prop_assert_eq!((t.nodes, t.leaves, t.max_depth, t.outputs), (nodes, Some(leaves), Some(depth), nodes));
        prop_assert_eq!(sim.records(), records);
    }

    /// A job given up as its worker stops (a try cut short by the run's stop, or by the worker
    /// leaving) goes back to the job list: a run that stops is not failed, and its checkpoint
    /// carries it on to its exact totals; a run that goes on does the job again.
    #[test]
    fn a_job_given_up_as_its_worker_stops_is_done_again(
        tree in 0usize..6,
        config in config_strategy(),
        actions in proptest::collection::vec((0u8..8, any::<usize>()), 0..200),
        victim in any::<usize>(),
        stop in any::<bool>(),
    ) {
        let (nodes, leaves, depth, records) = sequential(&Recorded(gw(tree)));
        let mut sim = Sim::new(gw(tree), config, 3);
        sim.play(actions, |_| 1);
        if sim.scheduler.outcome().is_some() {
            return Ok(());
        }
        if stop {
            sim.scheduler.stop(StopReason::Signal);
        }
        let ids: Vec<u64> = (0..3).filter_map(|k| sim.nth_worker(victim.wrapping_add(k))).collect();
        if !ids.into_iter().any(|id| sim.fail(id, true)) {
            return Ok(());
        }
        if stop {
            prop_assert_eq!(sim.finish(), Outcome::Stopped(StopReason::Signal));
            sim.checkpoint();
            sim.crash_and_resume();
        }
        prop_assert_eq!(sim.finish(), Outcome::Complete);
        let t = sim.scheduler.totals();
        prop_assert_eq!((t.nodes, t.leaves, t.max_depth, t.outputs), (nodes, Some(leaves), Some(depth), nodes));
        prop_assert_eq!(sim.records(), records);
    }

    /// A node limit stops the run at exactly that many nodes; a new run from the remaining jobs
    /// and the totals finishes the tree exactly.
    #[test]
    fn node_limit_stops_exactly_and_the_rest_resumes(
        tree in 0usize..6,
        config in config_strategy(),
        fraction in 0.0f64..1.0,
        kills in proptest::collection::vec(any::<usize>(), 0..3),
    ) {
        let gw_tree = gw(tree);
        let (nodes, leaves, depth, records) = sequential(&Recorded(gw(tree)));
        let limit = ((nodes as f64 * fraction) as u64).max(1);
        let mut sim = Sim::new(gw_tree, SchedulerConfig { node_limit: Some(limit), ..config.clone() }, 2);
        for k in kills {
            if let Some(id) = sim.nth_worker(k) {
                sim.run_one(id);
                sim.kill(id);
            }
        }
        let outcome = sim.finish();
        let first: Totals = sim.scheduler.totals().clone();
        if limit >= nodes {
            prop_assert_eq!(outcome, Outcome::Complete);
            return Ok(());
        }
        prop_assert_eq!(outcome, Outcome::Stopped(StopReason::NodeLimit));
        prop_assert_eq!(first.nodes, limit);

        let pending: Vec<Pending> = sim.scheduler.pending_jobs();
        let budget = sim.scheduler.budget().state().clone();
        let mut rest = Sim::new(gw(tree), config.clone(), 0);
        rest.scheduler = Scheduler::resume(config, first, Some(budget), pending);
        rest.join(1);
        rest.join(1);
        prop_assert_eq!(rest.finish(), Outcome::Complete);
        let t = rest.scheduler.totals();
        prop_assert_eq!((t.nodes, t.leaves, t.max_depth, t.outputs), (nodes, Some(leaves), Some(depth), nodes));
        let mut all = sim.records();
        all.extend(rest.records());
        all.sort();
        prop_assert_eq!(all, records);
    }
}

#[test]
fn queens_solutions_are_committed_once_each_through_the_scheduler() {
    let searcher = TreeSearcher::new(Queens::new(8));
    let mut scheduler = Scheduler::new(
        SchedulerConfig {
            budget: BudgetConfig { initial: 3, fixed: true, ..Default::default() },
            ..Default::default()
        },
        searcher.root().unwrap(),
    );
    let mut runner = searcher.runner(RunnerSettings::default()).unwrap();
    scheduler.add_worker(0, 1);
    let mut output = Vec::new();
    while scheduler.outcome().is_none() {
        let mut batch = ReportBatch::default();
        while let Some((_, message)) = scheduler.poll_send() {
            if let ToWorker::Jobs(jobs) = message {
                for job in jobs {
                    runner.run(&job, &mut batch).unwrap();
                }
            }
        }
        scheduler.handle_message(0, FromWorker::Reports(batch)).unwrap();
        output.extend_from_slice(scheduler.output());
        scheduler.clear_output();
    }
    let mut boards: Vec<&str> = std::str::from_utf8(&output).unwrap().lines().collect();
    assert_eq!(boards.len(), 92);
    boards.sort();
    boards.dedup();
    assert_eq!(boards.len(), 92);
    assert_eq!(scheduler.totals().outputs, 92);
}

/// The optimum by dynamic programming over capacities.
fn knapsack_dp(capacity: u64, items: &[(u64, u64)]) -> i64 {
    let mut best = vec![0u64; capacity as usize + 1];
    for &(v, w) in items {
        for c in (w as usize..=capacity as usize).rev() {
            best[c] = best[c].max(best[c - w as usize] + v);
        }
    }
    best[capacity as usize] as i64
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_optimum_survives_any_schedule(
        items in proptest::collection::vec((0u64..50, 1u64..30), 4..18),
        config in config_strategy(),
        keep_ties in any::<bool>(),
        actions in proptest::collection::vec((0u8..12, any::<usize>()), 0..400),
    ) {
        let capacity = items.iter().map(|i| i.1).sum::<u64>() / 2;
        let expected = knapsack_dp(capacity, &items);
        let config = SchedulerConfig { optimum: OptimumConfig { keep_ties, target: None }, ..config };
        // Worker processes of one to three threads share an incumbent (a searcher each), report
        // in batches in any order, die with everything unsent, join, and the master crashes and
        // resumes from checkpoints. The optimum must be exact and its record a real solution: a
        // lost incumbent (a job committed after pruning with a value whose record never arrived)
        // fails the check.
        let tree = Knapsack::new(capacity, &items).unwrap();
        let mut sim = Sim::with(Box::new(move || Box::new(TreeSearcher::optimising(tree.clone()))), config);
        sim.join(3);
        sim.play(actions, |n| 1 + n as u64 % 3);
        prop_assert_eq!(sim.finish(), Outcome::Complete);
        let best = sim.scheduler.totals().best.clone().expect("the empty packing at least");
        prop_assert_eq!(best.value, expected);
        // The record is a real packing of that value.
        for record in &best.records {
            let text = String::from_utf8(record.clone()).unwrap();
            let taken = text.split("items=").nth(1).unwrap();
            let (v, w) = taken.split(',').filter(|s| !s.is_empty()).map(|s| items[s.parse::<usize>().unwrap()])
                .fold((0, 0), |(v, w), (iv, iw)| (v + iv, w + iw));
            prop_assert!(w <= capacity);
            prop_assert_eq!(v as i64, expected);
        }
        prop_assert_eq!(sim.records(), best_records(&sim));
        // A master resumed from the checkpoint of the complete run writes the records again, in
        // place of those it wrote.
        sim.checkpoint();
        sim.crash_and_resume();
        prop_assert_eq!(sim.finish(), Outcome::Complete);
        prop_assert_eq!(sim.records(), best_records(&sim));
        prop_assert_eq!(sim.scheduler.totals().outputs, best.records.len() as u64);
    }

    /// With ties kept (`--all-best`), every optimal packing once, though the master crashes and
    /// resumes from checkpoints taken while ties come in: small values and weights make many ties.
    #[test]
    fn every_optimal_solution_survives_checkpoints_and_crashes(
        items in proptest::collection::vec((0u64..4, 1u64..6), 6..15),
        config in config_strategy(),
        actions in proptest::collection::vec((0u8..12, any::<usize>()), 0..400),
    ) {
        let capacity = items.iter().map(|i| i.1).sum::<u64>() / 2;
        let expected = knapsack_dp(capacity, &items);
        let config = SchedulerConfig { optimum: OptimumConfig { keep_ties: true, target: None }, ..config };
        let tree = Knapsack::new(capacity, &items).unwrap();
        let mut sim = Sim::with(Box::new(move || Box::new(TreeSearcher::optimising(tree.clone()))), config);
        sim.join(2);
        sim.play(actions, |n| 1 + n as u64 % 2);
        prop_assert_eq!(sim.finish(), Outcome::Complete);
        let records = sim.records();
        prop_assert_eq!(records.len() as u64, optimal_packings(capacity, &items, expected));
        prop_assert!(records.windows(2).all(|w| w[0] != w[1]), "a record twice: {:?}", records);
        prop_assert!(records.iter().all(|r| r.starts_with(&format!("value={expected} "))), "{:?}", records);
    }

    #[test]
    fn a_run_stopped_at_its_target_resumes_to_the_optimum_with_its_records_once(
        items in proptest::collection::vec((0u64..50, 1u64..30), 4..18),
        config in config_strategy(),
        keep_ties in any::<bool>(),
        share in 0.0..1.0f64,
        actions in proptest::collection::vec((0u8..12, any::<usize>()), 0..200),
    ) {
        let capacity = items.iter().map(|i| i.1).sum::<u64>() / 2;
        let expected = knapsack_dp(capacity, &items);
        let target = (expected as f64 * share) as i64;
        let config = SchedulerConfig { optimum: OptimumConfig { keep_ties, target: Some(target) }, ..config };
        let tree = Knapsack::new(capacity, &items).unwrap();
        let mut sim = Sim::with(Box::new(move || Box::new(TreeSearcher::optimising(tree.clone()))), config);
        sim.join(2);
        sim.play(actions, |_| 1);
        let first = sim.finish();
        prop_assert!(matches!(first, Outcome::Stopped(StopReason::Target) | Outcome::Complete), "{:?}", first);
        let reached = sim.scheduler.totals().best.clone().unwrap();
        prop_assert!(reached.value >= target);
        prop_assert_eq!(sim.records(), best_records(&sim));
        // Resumed with the same target, which the saved incumbent reaches: it stops at once.
        sim.checkpoint();
        sim.crash_and_resume();
        prop_assert_eq!(sim.finish(), first);
        prop_assert_eq!(sim.scheduler.totals().best.clone(), Some(reached));
        prop_assert_eq!(sim.records(), best_records(&sim));
        // Resumed without a target, on to the optimum: its records replace those of the target.
        sim.checkpoint();
        sim.config.optimum.target = None;
        sim.crash_and_resume();
        prop_assert_eq!(sim.finish(), Outcome::Complete);
        prop_assert_eq!(sim.scheduler.totals().best.as_ref().map(|b| b.value), Some(expected));
        prop_assert_eq!(sim.records(), best_records(&sim));
    }
}

/// The best records the run holds, sorted as [`Sim::records`].
fn best_records(sim: &Sim) -> Vec<String> {
    let best = sim.scheduler.totals().best.iter().flat_map(|b| b.records.clone());
    let mut records: Vec<String> = best.map(|r| String::from_utf8(r).unwrap()).collect();
    records.sort();
    records
}

/// Jobs are queued ahead at a worker only from a list that can spare one for each thread: near the
/// end of a run a queued job would wait behind its worker's current job, however long, while
/// another thread has nothing to do.
#[test]
fn no_job_is_queued_ahead_while_the_list_is_shorter_than_the_threads() {
    // The root of 3-queens has 3 children.
    let searcher = TreeSearcher::new(Queens::new(3));
    let config = SchedulerConfig {
        budget: BudgetConfig { initial: 1, fixed: true, ..Default::default() },
        ..Default::default()
    };
    let mut scheduler = Scheduler::new(config, searcher.root().unwrap());
    let mut runner = searcher.runner(RunnerSettings::default()).unwrap();
    scheduler.add_worker(0, 1);
    scheduler.add_worker(1, 1);
    let sent = |scheduler: &mut Scheduler| {
        let mut jobs = BTreeMap::new();
        while let Some((id, message)) = scheduler.poll_send() {
            if let ToWorker::Jobs(j) = message {
                jobs.entry(id).or_insert_with(Vec::new).extend(j);
            }
        }
        jobs
    };
    let first = sent(&mut scheduler);
    assert_eq!(first.values().map(Vec::len).sum::<usize>(), 1, "only the root to give: {first:?}");
    let (&worker, root) = first.iter().next().unwrap();
    let mut batch = ReportBatch::default();
    runner.run(&root[0], &mut batch).unwrap();
    assert_eq!(batch.returned.len(), 3);
    scheduler.handle_message(worker, FromWorker::Reports(batch)).unwrap();
    // One job for each idle thread; the third stays in the list for whichever thread is free first.
    let next = sent(&mut scheduler);
    assert_eq!(next.get(&0).map(Vec::len), Some(1), "{next:?}");
    assert_eq!(next.get(&1).map(Vec::len), Some(1), "{next:?}");
}

/// A scheduler over 6-queens (every node a record) with fixed budgets of 3, and a runner for its jobs.
fn six_queens_in_jobs_of_3() -> (Scheduler, Box<dyn JobRunner>) {
    let searcher = TreeSearcher::new(Recorded(Queens::new(6)));
    let config = SchedulerConfig {
        budget: BudgetConfig { initial: 3, fixed: true, ..Default::default() },
        ..Default::default()
    };
    let scheduler = Scheduler::new(config, searcher.root().unwrap());
    (scheduler, searcher.runner(RunnerSettings::default()).unwrap())
}

/// A report that cannot describe a run of its job (more leaves than nodes, its deepest node above
/// its start) is a violation: nothing of it counts, and once the worker is dropped its job goes
/// back to L, to be searched whole by another worker.
#[test]
fn implausible_reports_are_refused_and_their_jobs_searched_again() {
    let (mut scheduler, mut runner) = six_queens_in_jobs_of_3();
    let (mut next_worker, mut output) = (0, Vec::new());
    scheduler.add_worker(next_worker, 1);
    let mut spoiled = 0;
    while scheduler.outcome().is_none() {
        let Some((worker, ToWorker::Jobs(jobs))) = scheduler.poll_send() else { continue };
        if worker != next_worker {
            continue; // sent before its worker was dropped, and taken back then
        }
        for job in jobs {
            let mut batch = ReportBatch::default();
            runner.run(&job, &mut batch).unwrap();
            // Every third job of depth 1 or more misreports, in turn one way and the other.
            let spoil = job.depth > 0 && spoiled < 6 && job.id.0 % 3 == 0;
            if spoil {
                let r = &mut batch.reports[0];
                if spoiled % 2 == 0 {
                    r.leaves = Some(r.visited + 1);
                } else {
                    r.max_depth = Some(job.depth - 1);
                }
                spoiled += 1;
                let violation = scheduler.handle_message(worker, FromWorker::Reports(batch)).unwrap_err();
                assert!(violation.reason.contains(&format!("job {}", job.id.0)), "{}", violation.reason);
                scheduler.handle_disconnect(worker);
                next_worker += 1;
                scheduler.add_worker(next_worker, 1);
                break;
            }
            output.extend_from_slice(&batch.output);
            scheduler.handle_message(worker, FromWorker::Reports(batch)).unwrap();
        }
    }
    assert_eq!(spoiled, 6, "the run misreported fewer jobs than meant");
    let (nodes, leaves, max_depth, records) = sequential(&Recorded(Queens::new(6)));
    let totals = scheduler.totals();
    assert_eq!((totals.nodes, totals.leaves, totals.max_depth), (nodes, Some(leaves), Some(max_depth)));
    let mut got: Vec<String> = String::from_utf8(output).unwrap().lines().map(String::from).collect();
    got.sort();
    assert_eq!(got, records);
}

/// A stop reaches the workers holding jobs at once, once each (a remote worker then gives up the
/// retries of a legacy program's failed job), and not the idle ones.
#[test]
fn the_workers_holding_jobs_hear_of_a_stop_once() {
    let searcher = TreeSearcher::new(Queens::new(3));
    let config = SchedulerConfig {
        budget: BudgetConfig { initial: 1, fixed: true, ..Default::default() },
        ..Default::default()
    };
    let mut scheduler = Scheduler::new(config, searcher.root().unwrap());
    scheduler.add_worker(0, 1);
    scheduler.add_worker(1, 1);
    let sent = |scheduler: &mut Scheduler| std::iter::from_fn(|| scheduler.poll_send()).collect::<Vec<_>>();
    // Only the root to give: one worker holds it, the other is idle.
    let first = sent(&mut scheduler);
    assert_eq!(first.len(), 1, "{first:?}");
    let holder = first[0].0;
    scheduler.stop(StopReason::TimeLimit);
    assert_eq!(sent(&mut scheduler), vec![(holder, ToWorker::Stopping)]);
    scheduler.stop(StopReason::Signal);
    assert_eq!(sent(&mut scheduler), vec![]);
}

/// A stop takes back the jobs queued at the workers and not started, and they resume exactly; a
/// worker that hands back a job it does not hold, or one twice, breaks the protocol.
#[test]
fn jobs_not_started_go_back_when_the_run_stops() {
    let config = SchedulerConfig {
        budget: BudgetConfig { initial: 1, fixed: true, ..Default::default() },
        ..Default::default()
    };
    let (nodes, leaves, depth, records) = sequential(&Recorded(Queens::new(6)));
    let searcher = || Box::new(TreeSearcher::new(Recorded(Queens::new(6)))) as Box<dyn Searcher>;
    let mut sim = Sim::with(Box::new(searcher), config);
    sim.join(1);
    // The root's job returns its six children: jobs queue at the worker.
    sim.run_one(0);
    sim.flush(0);
    let held = sim.workers[&0].queue.len();
    assert!(held > 1, "{held} jobs queued");
    let before = sim.scheduler.pending_jobs().len();
    let in_flight = sim.scheduler.in_flight();
    sim.scheduler.stop(StopReason::TimeLimit);
    sim.deliver();
    assert_eq!(sim.workers[&0].queue.len(), 1, "one job left under way");
    assert_eq!(sim.scheduler.in_flight(), 1);
    assert_eq!(sim.scheduler.pending_jobs().len(), before, "the jobs out are saved by their start nodes either way");
    assert!(in_flight > 1);
    // Wrong hand-backs.
    let job = sim.workers[&0].queue[0].id;
    let wrong =
        |ids: Vec<bts_protocol::JobId>, sim: &mut Sim| sim.scheduler.handle_message(0, FromWorker::Unstarted(ids));
    assert!(
        wrong(vec![bts_protocol::JobId(999_999)], &mut sim).unwrap_err().reason.contains("not out with this worker")
    );
    assert!(wrong(vec![job, job], &mut sim).unwrap_err().reason.contains("twice"));
    assert_eq!(sim.finish(), Outcome::Stopped(StopReason::TimeLimit));
    sim.checkpoint();
    sim.crash_and_resume();
    assert_eq!(sim.finish(), Outcome::Complete);
    let t = sim.scheduler.totals();
    assert_eq!((t.nodes, t.leaves, t.max_depth, t.outputs), (nodes, Some(leaves), Some(depth), nodes));
    assert_eq!(sim.records(), records);
}

/// What happened to a job in [`run_with_failures`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    Sent,
    Failed,
    Done,
    /// The worker was told it gets no more jobs.
    Barred,
}

/// Runs a scheduler with one worker at each of `places` (worker i at places[i]) to its end:
/// `fails(worker, job)` says whether the worker fails the job instead of running it; worker
/// `gone.0` disconnects before the `gone.1`th job is run. Returns the outcome, the sorted records,
/// what happened to each job in order (worker, depth, node), and the scheduler.
#[allow(clippy::type_complexity)]
fn run_with_failures(
    places: &[Place],
    fails: impl Fn(u64, &Job) -> bool,
    mut gone: Option<(u64, usize)>,
) -> (Outcome, Vec<String>, Vec<(Step, u64, u32, Vec<u8>)>, Scheduler) {
    let (mut scheduler, mut runner) = six_queens_in_jobs_of_3();
    for (id, &place) in places.iter().enumerate() {
        scheduler.add_worker_at(id as u64, 1, place);
    }
    let (mut output, mut log) = (Vec::new(), Vec::new());
    let mut queued: VecDeque<(u64, Job)> = VecDeque::new();
    while scheduler.outcome().is_none() {
        while let Some((worker, message)) = scheduler.poll_send() {
            match message {
                ToWorker::Jobs(jobs) => {
                    for job in jobs {
                        log.push((Step::Sent, worker, job.depth, job.node.as_slice().to_vec()));
                        queued.push_back((worker, job));
                    }
                }
                ToWorker::Barred(_) => log.push((Step::Barred, worker, 0, Vec::new())),
                _ => {}
            }
        }
        let done = log.iter().filter(|e| e.0 != Step::Sent).count();
        if let Some((leaver, _)) = gone.filter(|&(_, at)| done == at) {
            gone = None;
            scheduler.handle_disconnect(leaver);
            queued.retain(|(w, _)| *w != leaver);
            continue;
        }
        let Some((worker, job)) = queued.pop_front() else { break };
        let step = if fails(worker, &job) { Step::Failed } else { Step::Done };
        log.push((step, worker, job.depth, job.node.as_slice().to_vec()));
        if step == Step::Failed {
            let node = format!("{:?}", job.node.as_slice());
            let message = format!("cannot open queens.py (on worker {worker})");
            scheduler.handle_message(worker, FromWorker::Failed(JobFailure::new(job.id, node, message))).unwrap();
            continue;
        }
        let mut batch = ReportBatch::default();
        runner.run(&job, &mut batch).unwrap();
        output.extend_from_slice(&batch.output);
        scheduler.handle_message(worker, FromWorker::Reports(batch)).unwrap();
    }
    let mut records: Vec<String> = String::from_utf8(output).unwrap().lines().map(String::from).collect();
    records.sort();
    (scheduler.outcome().cloned().expect("the run ended"), records, log, scheduler)
}

/// One host whose set-up is wrong (a program's file missing there) fails every job it gets: each
/// is tried again elsewhere, and once one of them succeeds elsewhere that host gets no more jobs.
/// The run completes with every record once.
#[test]
fn jobs_that_fail_in_one_place_are_tried_in_another_which_then_takes_the_run() {
    let (_, _, _, records) = sequential(&Recorded(Queens::new(6)));
    for bad in [0u64, 1] {
        let places = [Place::LOCAL, Place(7)];
        let (outcome, got_records, log, _) = run_with_failures(&places, |worker, _| worker == bad, None);
        assert_eq!(outcome, Outcome::Complete, "bad worker {bad}");
        assert_eq!(got_records, records, "bad worker {bad}");
        let failed: Vec<&Vec<u8>> = log.iter().filter(|e| e.0 == Step::Failed).map(|e| &e.3).collect();
        assert!(!failed.is_empty(), "bad worker {bad} got no job");
        // Each failed job was done elsewhere.
        assert!(failed.iter().all(|&n| log.iter().any(|e| e.0 == Step::Done && &e.3 == n)), "bad worker {bad}");
        // No job went to the bad worker once one it failed was done elsewhere, and it was told so.
        let settled = log.iter().position(|e| e.0 == Step::Done && failed.contains(&&e.3)).unwrap();
        let late: Vec<_> = log[settled..].iter().filter(|e| e.0 == Step::Sent && e.1 == bad).collect();
        assert!(late.is_empty(), "bad worker {bad}: {late:?}");
        let told: Vec<u64> = log.iter().filter(|e| e.0 == Step::Barred).map(|e| e.1).collect();
        assert_eq!(told, [bad], "bad worker {bad}");
    }
}

/// A job that fails in two places is the tree's or the program's fault: the run fails, and says
/// both. One that fails with no other place to go fails the run at once, as before.
#[test]
fn a_job_that_fails_in_two_places_or_with_nowhere_else_fails_the_run() {
    // Every job of depth 2 fails, wherever it runs.
    let doomed = |_: u64, job: &Job| job.depth == 2;
    let (outcome, _, log, scheduler) = run_with_failures(&[Place::LOCAL, Place(7)], doomed, None);
    let Outcome::Failed(failure) = outcome else { panic!("{outcome:?}") };
    assert!(failure.message.contains("it had failed elsewhere too: cannot open queens.py"), "{}", failure.message);
    // The job that failed twice failed once on each worker, and the checkpoint keeps it.
    let failures: Vec<_> = log.iter().filter(|e| e.0 == Step::Failed).collect();
    let twice =
        failures.iter().find(|a| failures.iter().any(|b| b.3 == a.3 && b.1 != a.1)).expect("a job failed twice");
    assert_eq!(failures.iter().filter(|e| e.3 == twice.3).count(), 2);
    assert!(scheduler.pending_jobs().iter().any(|p| p.node.as_slice() == twice.3.as_slice()));

    // Two workers in one place: nowhere else to try, so the first failure ends the run.
    let (outcome, _, log, _) = run_with_failures(&[Place(7), Place(7)], doomed, None);
    assert!(matches!(outcome, Outcome::Failed(ref f) if !f.message.contains("elsewhere")), "{outcome:?}");
    assert_eq!(log.iter().filter(|e| e.0 == Step::Failed).count(), 1);
}

/// Two hosts of three set up wrong: a job that failed on one of them and then on the other still
/// gets its third machine, the good one, and the run completes.
#[test]
fn a_job_gets_three_machines_before_it_fails_the_run() {
    let (_, _, _, records) = sequential(&Recorded(Queens::new(6)));
    let places = [Place(5), Place(6), Place::LOCAL];
    let (outcome, got, log, _) = run_with_failures(&places, |worker, _| worker < 2, None);
    assert_eq!(outcome, Outcome::Complete);
    assert_eq!(got, records);
    let failed_twice = log
        .iter()
        .filter(|e| e.0 == Step::Failed)
        .any(|a| log.iter().any(|b| b.0 == Step::Failed && b.3 == a.3 && b.1 != a.1));
    assert!(failed_twice, "no job failed on both bad hosts: the test tests nothing");
}

/// Once the only workers left are barred ones (the good one left), the bar is lifted instead of
/// the run waiting for ever: here their jobs fail again, and the run fails.
#[test]
fn barred_workers_left_alone_get_jobs_again() {
    // The master's threads fail every job below the root; the remote worker leaves after 30 jobs.
    let places = [Place::LOCAL, Place(7)];
    let (outcome, _, log, _) = run_with_failures(&places, |worker, job| worker == 0 && job.depth > 0, Some((1, 30)));
    assert!(matches!(outcome, Outcome::Failed(_)), "{outcome:?}");
    let remote_done = log.iter().filter(|e| e.0 == Step::Done && e.1 == 1).count();
    assert!(remote_done > 0, "the bar never came into play");
}

/// Failures that come and go: every job fails on exactly one of three machines (which one depends
/// on the node). Each failure bars a machine once the job succeeds elsewhere; once every other
/// machine is barred, the bar is lifted rather than the run failed, and the run completes.
#[test]
fn failures_that_come_and_go_do_not_fail_the_run() {
    let (_, _, _, records) = sequential(&Recorded(Queens::new(6)));
    let places = [Place::LOCAL, Place(5), Place(6)];
    let fails = |worker: u64, job: &Job| job.node.as_slice().iter().map(|&b| u64::from(b)).sum::<u64>() % 3 == worker;
    let (outcome, got, log, _) = run_with_failures(&places, fails, None);
    assert_eq!(outcome, Outcome::Complete);
    assert_eq!(got, records);
    let failing: std::collections::BTreeSet<u64> = log.iter().filter(|e| e.0 == Step::Failed).map(|e| e.1).collect();
    assert_eq!(failing.len(), 3, "every machine failed a job: {failing:?}");
}

/// A time limit reaches the searcher and the workers holding jobs at once, though no event comes
/// (long jobs out): they heard of it only with the next event, or the next tick, 250 ms later.
#[test]
fn a_time_limit_is_told_at_once() {
    use bts_master::{Discard, DriveOptions, Event, Observer, RunView, drive};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};
    use std::time::{Duration, Instant};

    struct Told(Arc<AtomicBool>);
    impl Observer for Told {
        fn stopping(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
        fn finish(&mut self, _: &dyn RunView) {}
    }

    let (mut scheduler, _) = six_queens_in_jobs_of_3();
    let (events, rx) = mpsc::channel();
    let (link, inbox) = mpsc::channel::<ToWorker>();
    events.send(Event::Joined { worker: 0, threads: 1, place: Place::LOCAL, link: Box::new(link) }).unwrap();
    let told = Arc::new(AtomicBool::new(false));
    let observer = Told(Arc::clone(&told));
    let deadline = Instant::now() + Duration::from_millis(100);
    let driver = std::thread::spawn(move || {
        let options = DriveOptions { deadline: Some(deadline), ..DriveOptions::default() };
        drive(&mut scheduler, &rx, &mut Discard, &options, &mut { observer }).unwrap()
    });
    assert!(matches!(inbox.recv().unwrap(), ToWorker::Jobs(_)));
    // The job is never reported: only the deadline can wake the driver.
    assert_eq!(inbox.recv_timeout(Duration::from_secs(10)), Ok(ToWorker::Stopping));
    assert!(Instant::now() < deadline + Duration::from_secs(5));
    assert!(told.load(Ordering::SeqCst), "the searcher was not told");
    events.send(Event::Abort(StopReason::Signal)).unwrap();
    assert_eq!(driver.join().unwrap(), Outcome::Stopped(StopReason::Signal));
}

/// A worker whose link is gone (its connection shut as it left the run when told to stop) still
/// has its last reports on their way, ahead of the event that says it left: they count, and its
/// jobs are not redone. A failed send once dropped the worker at once, which took the reports for
/// a stranger's and redid their jobs (and logged a worker that left as asked as lost).
#[test]
fn the_last_reports_of_a_worker_whose_link_is_gone_count() {
    use bts_master::{Discard, DriveOptions, Event, Link, drive};
    use std::sync::mpsc;
    use std::sync::{Arc, Mutex};

    /// A link to a worker that has gone: it takes nothing, and keeps what it was given.
    struct Gone(Arc<Mutex<Vec<Job>>>);
    impl Link for Gone {
        fn send(&self, message: ToWorker) -> bool {
            if let ToWorker::Jobs(jobs) = message {
                self.0.lock().unwrap().extend(jobs);
            }
            false
        }
    }

    let (mut scheduler, mut runner) = six_queens_in_jobs_of_3();
    let root = scheduler.pending_jobs()[0].node.clone();
    let (events, rx) = mpsc::channel();
    let given = Arc::new(Mutex::new(Vec::new()));
    let gone = Box::new(Gone(Arc::clone(&given)));
    events.send(Event::Joined { worker: 0, threads: 1, place: Place(1), link: gone }).unwrap();
    let (to_b, b_inbox) = mpsc::channel::<ToWorker>();
    let driver = std::thread::spawn(move || {
        let options = DriveOptions { workers_may_join: true, ..DriveOptions::default() };
        let outcome = drive(&mut scheduler, &rx, &mut Discard, &options, &mut ()).unwrap();
        (outcome, scheduler.totals().clone())
    });
    // Worker 0 got the root as it went: its report, then its goodbye.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while given.lock().unwrap().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no job for the worker");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    let first = given.lock().unwrap()[0].clone();
    assert_eq!(first.node, root);
    let mut batch = ReportBatch::default();
    runner.run(&first, &mut batch).unwrap();
    events.send(Event::Message(0, FromWorker::Reports(batch))).unwrap();
    events.send(Event::Left(0)).unwrap();
    // Worker 1 does the rest.
    events.send(Event::Joined { worker: 1, threads: 1, place: Place(2), link: Box::new(to_b) }).unwrap();
    let mut jobs_of_b = Vec::new();
    while let Ok(message) = b_inbox.recv() {
        match message {
            ToWorker::Jobs(jobs) => {
                let mut batch = ReportBatch::default();
                for job in jobs {
                    runner.run(&job, &mut batch).unwrap();
                    jobs_of_b.push(job.node);
                }
                events.send(Event::Message(1, FromWorker::Reports(batch))).unwrap();
            }
            ToWorker::Finish => break,
            _ => {}
        }
    }
    let (outcome, totals) = driver.join().unwrap();
    assert_eq!(outcome, Outcome::Complete);
    assert_eq!(totals.nodes, sequential(&Recorded(Queens::new(6))).0);
    assert!(!jobs_of_b.contains(&root), "the root, whose report came, was searched again");
}
