//! Type erasure from a [`Tree`] down to jobs and reports, so that the worker loops, the master and
//! the command line handle every tree (built-in, user-defined or a legacy program) alike.

use crate::optimise::{Enumerate, Goal, Maximise, Optimise, SharedIncumbent};
use crate::{CountOnly, Limits, Records, Recursive, Tree, search_recursive, search_with, unwind};
use bts_protocol::{Incumbent, Job, JobFailure, JobReport, NodeBytes, ReportBatch, Returned, Solution};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Per-runner settings fixed for a whole run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunnerSettings {
    /// Keep output records (false for `--count-only`: records are counted, not sent).
    pub keep_output: bool,
    /// The runner's reports never reach the master (the progress prober, `bts estimate`): it keeps
    /// an incumbent of its own, for a branch and bound must prune only with values whose records
    /// the master gets.
    pub detached: bool,
    /// The most bytes of records, returned nodes and solutions a legacy program's job may write
    /// before its `done` (bts holds them in memory until then): a job that writes more fails. A
    /// remote worker sends a job's answer in one frame, so its limit is a frame's.
    pub answer_limit: usize,
}

/// A job's answer held in memory, at most (a remote worker's: [`MAX_FRAME`], less room for the
/// rest of the frame).
///
/// [`MAX_FRAME`]: bts_protocol::codec::MAX_FRAME
pub const MAX_JOB_ANSWER: usize = 256 << 20;

impl Default for RunnerSettings {
    fn default() -> Self {
        Self { keep_output: true, detached: false, answer_limit: MAX_JOB_ANSWER }
    }
}

/// A tree as the worker machinery sees it: it gives the root and makes job runners.
pub trait Searcher: Send + Sync {
    /// The root node, serialised.
    fn root(&self) -> Result<NodeBytes, String>;

    /// A runner for one worker thread (a legacy program starts its process here).
    fn runner(&self, settings: RunnerSettings) -> Result<Box<dyn JobRunner>, String>;

    /// A splittable depth-first stack for the random-polling mode, or `None` when the tree cannot
    /// offer one (a legacy program cannot split its search).
    fn stack_worker(&self, settings: RunnerSettings) -> Option<Box<dyn crate::StackWorker>> {
        let _ = settings;
        None
    }

    /// The budget a run starts from when none is given, for a tree whose jobs cost more to start
    /// than a hundred nodes (the default): the first job's budget sets how finely the top of the
    /// tree is split into jobs, before the budget controller has measured anything.
    fn first_budget(&self) -> Option<u64> {
        None
    }

    /// The tree's own totals, if its jobs report any (`JobReport::counters`, in this order).
    fn counters(&self) -> Option<CounterNames> {
        None
    }

    /// What an output file holds around the records, for a tree whose records make a file format of
    /// their own (lrs's `begin` ... `end`); `records` is `None` when the file is created and the
    /// number of records when the run is complete. The header must have the same length both times:
    /// it is written first and rewritten in place.
    fn file_frame(&self, records: Option<u64>) -> Option<FileFrame> {
        let _ = records;
        None
    }

    /// True for a branch and bound (an [`Optimise`] tree, or a program that reports solutions):
    /// the run keeps the best solution instead of writing every record.
    fn optimises(&self) -> bool {
        self.incumbent().is_some()
    }

    /// The incumbent this process's runners share, for a branch and bound.
    fn incumbent(&self) -> Option<&SharedIncumbent> {
        None
    }

    /// The [`input_digest`] of the file the tree was read from, for a tree read from one: remote
    /// workers and resumed runs check that they read the same file as the run did.
    fn input_digest(&self) -> Option<u32> {
        None
    }

    /// True when a runner's jobs run in other processes (a legacy program): their cost is not the
    /// calling thread's CPU time, which only waits for them.
    fn runs_elsewhere(&self) -> bool {
        false
    }

    /// The run has been told to stop: its runners may give up what would only hold the stop up
    /// (a tree's job ends at its next look and hands the rest back; a legacy program's failed job
    /// is not tried again).
    fn stopping(&self) {}

    /// The run is over while jobs may still run (it failed, or stopped at once): their results
    /// are of no use, and runners may give them up now (a legacy program is killed).
    fn abandon(&self) {}

    /// A run starts with this searcher: what an earlier run told it ([`stopping`](Self::stopping),
    /// [`abandon`](Self::abandon)) no longer holds.
    fn begin_run(&self) {}
}

/// A digest of an input file's bytes (CRC-32): enough to tell a stale or different copy.
pub fn input_digest(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// A digest as messages show it: eight hex digits, or `none` for a tree read from no file.
pub fn digest_text(digest: Option<u32>) -> String {
    digest.map_or_else(|| "none".into(), |d| format!("{d:08x}"))
}

/// The names of a tree's own totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterNames {
    /// The key of the summary's object that holds them (`lrs`).
    pub key: &'static str,
    pub names: Vec<&'static str>,
}

/// The text before and after the records of an output file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileFrame {
    pub header: String,
    pub footer: String,
}

/// Runs jobs one after another on one thread.
pub trait JobRunner: Send {
    /// Runs `job` and appends its report, returned nodes and output to `batch`. On failure `batch`
    /// is left as it was: nothing of a failed job is reported.
    fn run(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), JobFailure>;

    /// The master made a better solution known (branch and bound; plain trees ignore it).
    fn raise(&mut self, incumbent: Incumbent) {
        let _ = incumbent;
    }
}

/// The [`Searcher`] of a [`Tree`]: nodes are serialised with postcard. `G` says whether the tree
/// is enumerated ([`Enumerate`]) or optimised ([`Maximise`], with the incumbent the process's
/// threads share); `S` how a job searches ([`Loop`], or the tree's own [`Recursion`]).
pub struct TreeSearcher<T, G = Enumerate, S = Loop> {
    tree: Arc<T>,
    goal: Arc<G>,
    input_digest: Option<u32>,
    flags: Arc<StopFlags>,
    search: std::marker::PhantomData<S>,
}

/// What a run tells the jobs running, for a [`Searcher`] to keep: it stops
/// ([`Searcher::stopping`]), or is over ([`Searcher::abandon`]: it stops too).
#[derive(Debug, Default)]
pub struct StopFlags {
    stopping: AtomicBool,
    abandoned: AtomicBool,
}

impl StopFlags {
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    pub fn abandon(&self) {
        self.abandoned.store(true, Ordering::Relaxed);
        self.stop();
    }

    /// A new run: the last one's stop no longer holds.
    pub fn begin_run(&self) {
        self.stopping.store(false, Ordering::Relaxed);
        self.abandoned.store(false, Ordering::Relaxed);
    }

    /// The flag a tree's search looks at ([`Job::abort`](crate::Job::abort)): set, it ends at its
    /// next look, handing back the rest as if its budget were spent.
    pub fn stopping_flag(&self) -> &AtomicBool {
        &self.stopping
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// The run is over: the results of jobs still running are dropped.
    pub fn abandoned(&self) -> bool {
        self.abandoned.load(Ordering::Relaxed)
    }
}

impl<T, G> TreeSearcher<T, G> {
    fn with_goal(tree: T, goal: G) -> Self {
        let (tree, goal, flags) = (Arc::new(tree), Arc::new(goal), Arc::default());
        Self { tree, goal, input_digest: None, flags, search: std::marker::PhantomData }
    }
}

impl<T: Tree> TreeSearcher<T> {
    pub fn new(tree: T) -> Self {
        Self::with_goal(tree, Enumerate)
    }
}

impl<T: Optimise> TreeSearcher<T, Maximise> {
    /// A branch and bound over `tree`.
    pub fn optimising(tree: T) -> Self {
        Self::with_goal(tree, Maximise::default())
    }
}

impl<T: Recursive, G> TreeSearcher<T, G> {
    /// The same search, its jobs run by the tree's own recursion ([`Recursive`]); random polling
    /// and progress estimates still walk the tree through its children iterators.
    pub fn recursive(self) -> TreeSearcher<T, G, Recursion> {
        let Self { tree, goal, input_digest, flags, .. } = self;
        TreeSearcher { tree, goal, input_digest, flags, search: std::marker::PhantomData }
    }
}

impl<T, G, S> TreeSearcher<T, G, S> {
    pub fn tree(&self) -> &T {
        &self.tree
    }

    /// The same search, for a tree read from a file of these bytes (see [`Searcher::input_digest`]).
    pub fn read_from(self, file: &[u8]) -> Self {
        Self { input_digest: Some(input_digest(file)), ..self }
    }
}

/// How a job searches its subtree.
pub trait JobSearch<T: Tree, G: Goal<T>>: Send + Sync + 'static {
    fn search(
        tree: &T,
        goal: &G,
        job: crate::Job<'_, T::Node>,
        out: &mut impl Records,
        found: &mut Vec<Solution>,
        returned: &mut impl FnMut(T::Node, u32),
    ) -> crate::JobStats;
}

/// Jobs walk the tree through its children iterators ([`search_with`]).
pub struct Loop;

impl<T: Tree, G: Goal<T>> JobSearch<T, G> for Loop {
    #[inline]
    fn search(
        tree: &T,
        goal: &G,
        job: crate::Job<'_, T::Node>,
        out: &mut impl Records,
        found: &mut Vec<Solution>,
        returned: &mut impl FnMut(T::Node, u32),
    ) -> crate::JobStats {
        search_with(tree, goal, job, out, found, returned)
    }
}

/// Jobs run the tree's own recursion ([`search_recursive`]).
pub struct Recursion;

impl<T: Recursive, G: Goal<T>> JobSearch<T, G> for Recursion
where
    T::Node: Clone,
{
    #[inline]
    fn search(
        tree: &T,
        goal: &G,
        job: crate::Job<'_, T::Node>,
        out: &mut impl Records,
        found: &mut Vec<Solution>,
        returned: &mut impl FnMut(T::Node, u32),
    ) -> crate::JobStats {
        search_recursive(tree, goal, job, out, found, returned)
    }
}

impl<T: Tree, G: Goal<T>, S: JobSearch<T, G>> Searcher for TreeSearcher<T, G, S> {
    fn root(&self) -> Result<NodeBytes, String> {
        let root = unwind::catch(|| self.tree.root()).map_err(|m| format!("the tree's root() panicked: {m}"))?;
        encode(&root).map_err(|e| format!("cannot serialise the root {root:?}: {e}"))
    }

    fn runner(&self, settings: RunnerSettings) -> Result<Box<dyn JobRunner>, String> {
        let goal = if settings.detached { Arc::new(self.goal.detached()) } else { Arc::clone(&self.goal) };
        let tree = Arc::clone(&self.tree);
        let runner = TreeRunner::<T, G, S> {
            tree,
            goal,
            settings,
            flags: Arc::clone(&self.flags),
            out: String::new(),
            found: Vec::new(),
            search: std::marker::PhantomData,
        };
        Ok(Box::new(runner))
    }

    fn stack_worker(&self, settings: RunnerSettings) -> Option<Box<dyn crate::StackWorker>> {
        let (tree, goal) = (Arc::clone(&self.tree), Arc::clone(&self.goal));
        Some(Box::new(crate::TreeStack::with_goal(tree, goal, settings.keep_output)))
    }

    fn incumbent(&self) -> Option<&SharedIncumbent> {
        self.goal.incumbent()
    }

    fn input_digest(&self) -> Option<u32> {
        self.input_digest
    }

    /// A job ends within moments, with what it searched and the rest handed back: a stop (a time
    /// limit, a signal, a worker leaving) need not wait for budgets of any size, and loses nothing.
    fn stopping(&self) {
        self.flags.stop();
    }

    fn abandon(&self) {
        self.flags.abandon();
    }

    fn begin_run(&self) {
        self.flags.begin_run();
    }
}

struct TreeRunner<T, G, S> {
    tree: Arc<T>,
    goal: Arc<G>,
    settings: RunnerSettings,
    flags: Arc<StopFlags>,
    /// Output records of the running job.
    out: String,
    /// Solutions the running job found.
    found: Vec<Solution>,
    search: std::marker::PhantomData<S>,
}

impl<T: Tree, G: Goal<T>, S: JobSearch<T, G>> JobRunner for TreeRunner<T, G, S> {
    fn run(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), JobFailure> {
        let started = Instant::now();
        let fail = |message: String| JobFailure::new(job.id, describe::<T>(&job.node), message);
        let node: T::Node = postcard::from_bytes(job.node.as_slice())
            .map_err(|e| fail(format!("cannot decode the job's node: {e}")))?;
        if let Some(shared) = self.goal.incumbent() {
            shared.raise(job.incumbent);
        }
        let returned_before = batch.returned.len();
        let limits = Limits { budget: job.budget.0, max_depth: job.max_depth };
        let (tree, goal) = (&*self.tree, &*self.goal);
        let (out, found) = (&mut self.out, &mut self.found);
        out.clear();
        found.clear();
        let mut encode_error = None;
        let returned = &mut batch.returned;
        let keep_output = self.settings.keep_output;
        let abort = Some(self.flags.stopping_flag());
        let result = unwind::catch(|| {
            let mut give_back = |child, depth| match encode(&child) {
                Ok(node) => returned.push(Returned { depth, node }),
                Err(e) => {
                    encode_error.get_or_insert_with(|| format!("cannot serialise node {child:?}: {e}"));
                }
            };
            let search = crate::Job { start: &node, depth: job.depth, limits, abort };
            if keep_output {
                S::search(tree, goal, search, out, found, &mut give_back)
            } else {
                S::search(tree, goal, search, &mut CountOnly, found, &mut give_back)
            }
        });
        let failure = match (result, encode_error) {
            // Nobody waits for it: the run is over, or the master that gave it out is lost.
            (Ok(_), None) if self.flags.abandoned() => {
                batch.returned.truncate(returned_before);
                let message = "given up: the run is over, or its master lost";
                return Err(JobFailure { given_up: true, ..fail(message.into()) });
            }
            (Ok(stats), None) => {
                let output_bytes = if self.settings.keep_output {
                    batch.output.extend_from_slice(self.out.as_bytes());
                    self.out.len() as u64
                } else {
                    0
                };
                batch.reports.push(JobReport {
                    id: job.id,
                    visited: stats.visited,
                    leaves: Some(stats.leaves),
                    max_depth: Some(stats.max_depth),
                    outputs: stats.outputs,
                    returned: (batch.returned.len() - returned_before) as u32,
                    output_bytes,
                    elapsed_ns: started.elapsed().as_nanos() as u64,
                    counters: Vec::new(),
                    pruned: stats.pruned,
                });
                // With the job's report: see `SharedIncumbent` for why that is enough.
                batch.solutions.append(&mut self.found);
                return Ok(());
            }
            (Err(panic), _) => format!("the tree oracle panicked: {panic}"),
            (Ok(_), Some(e)) => e,
        };
        batch.returned.truncate(returned_before);
        Err(fail(failure))
    }

    fn raise(&mut self, incumbent: Incumbent) {
        if let Some(shared) = self.goal.incumbent() {
            shared.raise(incumbent);
        }
    }
}

fn encode<N: serde::Serialize>(node: &N) -> Result<NodeBytes, postcard::Error> {
    postcard::to_extend(node, NodeBytes::new())
}

/// The debug form of a serialised node, for error messages.
fn describe<T: Tree>(bytes: &NodeBytes) -> String {
    match postcard::from_bytes::<T::Node>(bytes.as_slice()) {
        Ok(node) => debug_text(&node),
        Err(_) => debug_text(bytes),
    }
}

/// The debug form of a node for an error message, cut short after 2,000 bytes: a node may hold
/// megabytes, and its whole text would be made only to be cut. A `Debug` that panics gives
/// "(a node whose Debug panicked)".
pub(crate) fn debug_text<N: std::fmt::Debug + ?Sized>(node: &N) -> String {
    const MAX: usize = 2000;
    /// The text so far, and whether it was cut.
    struct Bounded(String, bool);
    impl std::fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            if self.1 {
                return Err(std::fmt::Error);
            }
            let room = MAX - self.0.len();
            if s.len() <= room {
                self.0.push_str(s);
                return Ok(());
            }
            let cut = (0..=room).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            self.0.push_str(&s[..cut]);
            self.0.push_str("...");
            self.1 = true;
            Err(std::fmt::Error)
        }
    }
    let text = unwind::catch(|| {
        let mut text = Bounded(String::new(), false);
        let _ = std::fmt::Write::write_fmt(&mut text, format_args!("{node:?}"));
        text.0
    });
    text.unwrap_or_else(|_| "(a node whose Debug panicked)".into())
}

#[cfg(test)]
mod tests {
    use super::debug_text;

    #[test]
    fn a_nodes_text_in_an_error_is_cut_short_without_being_made_whole() {
        assert_eq!(debug_text(&vec![1, 2]), "[1, 2]");
        // 20 MB of node: its debug form would be 60 MB.
        let text = debug_text(&vec![7u8; 20 << 20]);
        assert!(text.len() <= 2003 && text.starts_with("[7, 7") && text.ends_with("..."), "{}", text.len());
        // Cut on a character's boundary.
        let text = debug_text(&"é".repeat(5000));
        assert!(text.ends_with("...") && text.len() <= 2003);
        struct Panicky;
        impl std::fmt::Debug for Panicky {
            fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                panic!("no debug form")
            }
        }
        assert_eq!(debug_text(&Panicky), "(a node whose Debug panicked)");
    }
}
