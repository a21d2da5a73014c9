//! The work left in a run, estimated as it goes by Knuth's random probes, honestly: a figure with
//! its standard error when the probes support one, "unknown" when they cannot.
//!
//! Budget mode: the work left is the sum of the subtrees of the job list's nodes. Nodes of the same
//! depth are alike (in UTS they are identically distributed), nodes of different depths are not
//! (a shallow node of a UTS tree has thousands of times the subtree of a deep one, and a LIFO job
//! list holds mostly deep ones). So the job list is stratified by depth, as the tree-size
//! estimation paper the project follows (papers/003) maps subtrees by depth: each depth's mean
//! subtree size is estimated from probes of its own nodes, the work left is Σ n_d · mean_d over the
//! depths d holding n_d nodes, and its variance Σ n_d² · se_d²; the start node of a job out with a
//! worker counts as a node of the job list (none of its subtree is committed before its report).
//! Probes go where they reduce the variance most. A depth whose probes do not support a figure
//! ([`Profile::supported`]: heavy-tailed subtrees, too few probes) makes the whole estimate
//! unknown: a figure missing most of the work is worse than none.
//!
//! Random polling has no job list to look at: the root is probed instead, and the work left is the
//! tree's estimated size minus the nodes visited.

use bts_master::RunView;
use bts_protocol::NodeBytes;
use bts_worker::estimate::{MIN_PROBES, Profile, SplitMix64, probe_levels};
use bts_worker::{RunnerSettings, Searcher};
use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::time::{Duration, Instant};

/// The prober uses at most this share of one core.
const PROBER_SHARE: f64 = 0.01;
/// Probes of a batch of nodes go on for about this long (at least one probe a node).
const SLICE: Duration = Duration::from_millis(4);
/// At most this many depths a batch: the depths not yet supported, at once.
const BATCH: usize = 16;
/// Nodes of a depth probed in a batch, one probe each in turn: probes of one node only would show
/// the spread of that node's probes, not the spread of the depth's subtrees.
const PICKS: usize = 64;
/// A depth's mean rests on the probes of this long ago at most, so that it follows the job list as
/// its nodes change (in queens, the nodes left at a depth are not those seen early)...
const MAX_AGE: Duration = Duration::from_secs(6);
/// ... and a depth whose last probes are older than this is probed again.
const REFRESH: Duration = Duration::from_secs(3);
/// At most this many nodes of the job list are looked at to count its depths (evenly spread).
const SCAN: usize = 1 << 16;
/// A figure is shown only when twice its standard error is at most this share of it.
const MAX_RELATIVE_ERROR: f64 = 0.5;
/// ... or this share, for a figure from probes of the root alone (random polling), which no check
/// by depth backs: on a geometric UTS tree they said ~530M ±32% of 1.6G.
const MAX_ROOT_RELATIVE_ERROR: f64 = 0.2;

/// What the probes say about the tree's size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Guess {
    /// The probes cannot support a figure (yet).
    Unknown,
    /// The tree's size (the nodes visited plus the work left), and the standard error.
    Total { total: f64, std_error: f64 },
}

/// Estimates the work left, probing nodes on a thread of its own.
pub struct Remaining {
    requests: Sender<Vec<(u32, Vec<NodeBytes>)>>,
    results: Receiver<Vec<(u32, Profile)>>,
    /// Whether a node is being probed (one at a time).
    probing: bool,
    /// Random polling: the root, probed again and again.
    root: Option<NodeBytes>,
    /// Probes by the depth of the probed node: the batches of the last [`MAX_AGE`], and their sum.
    strata: BTreeMap<u32, (VecDeque<(Instant, Profile)>, Profile)>,
    rng: SplitMix64,
}

impl Remaining {
    /// `polling`: the run has no job list to sample, so the root is probed.
    pub fn spawn(searcher: &Arc<dyn Searcher>, polling: bool) -> Option<Self> {
        // What a branch and bound visits depends on the solutions it finds as it goes, which
        // probes cannot foresee: no figure rather than a wrong one.
        if searcher.optimises() {
            return None;
        }
        let root = if polling { Some(searcher.root().ok()?) } else { None };
        let mut runner =
            match searcher.runner(RunnerSettings { keep_output: false, detached: true, ..RunnerSettings::default() }) {
                Ok(r) => r,
                Err(e) => {
                    tracing::debug!("no progress estimate: {e}");
                    return None;
                }
            };
        let clock = ProbeClock::for_searcher(&**searcher);
        let (requests, inbox) = mpsc::channel::<Vec<(u32, Vec<NodeBytes>)>>();
        let (outbox, results) = mpsc::channel();
        let spawned = std::thread::Builder::new().name("bts-estimator".into()).spawn(move || {
            let mut rng = SplitMix64::new(0x6B6E_7574_6865_7374);
            let mut levels = Vec::new();
            for batch in inbox {
                let started = clock.now();
                let share = SLICE / batch.len().max(1) as u32;
                let mut profiles = Vec::new();
                for (depth, nodes) in batch {
                    let (mut profile, begun) = (Profile::default(), clock.now());
                    for node in nodes.iter().cycle() {
                        if profile.estimate.probes >= nodes.len() as u64 && clock.now().saturating_sub(begun) >= share {
                            break;
                        }
                        let probed =
                            probe_levels(&mut *runner, node.clone(), depth, &mut |d| rng.below(d), &mut levels);
                        if let Err(f) = probed {
                            tracing::debug!("progress estimates stop: a probe failed at {}: {}", f.node, f.message);
                            return;
                        }
                        profile.add(&levels);
                    }
                    profiles.push((depth, profile));
                }
                if outbox.send(profiles).is_err() {
                    return;
                }
                let pause = clock.now().saturating_sub(started).mul_f64(1.0 / PROBER_SHARE - 1.0);
                // Up to ten minutes: a legacy program's batch of probes (a process a step) may take
                // seconds, and is paid for by a long pause, not by the workers' cores.
                std::thread::sleep(pause.min(Duration::from_secs(600)));
            }
        });
        let seed = Instant::now().elapsed().as_nanos() as u64 ^ 0x5EED;
        spawned.ok().map(|_| Self {
            requests,
            results,
            probing: false,
            root,
            strata: BTreeMap::new(),
            rng: SplitMix64::new(seed),
        })
    }

    /// Takes in the probes done since the last call, asks for the next ones, and says what they
    /// support now.
    pub fn update(&mut self, view: &dyn RunView) -> Guess {
        let now = Instant::now();
        while let Ok(batch) = self.results.try_recv() {
            for (depth, profile) in batch {
                self.strata.entry(depth).or_default().0.push_back((now, profile));
            }
            self.probing = false;
        }
        for (recent, sum) in self.strata.values_mut() {
            // The root's probes all stand for the same thing: keep them all.
            while self.root.is_none() && recent.front().is_some_and(|(t, _)| now.duration_since(*t) > MAX_AGE) {
                recent.pop_front();
            }
            *sum = recent.iter().fold(Profile::default(), |mut s, (_, p)| {
                s.merge(p);
                s
            });
        }
        let nodes = view.totals().nodes as f64;
        if let Some(root) = &self.root {
            if !self.probing {
                self.probing = self.requests.send(vec![(0, vec![root.clone()])]).is_ok();
            }
            return self.stratum(0).map_or(Guess::Unknown, |p| whole_tree(p, nodes));
        }
        let out = view.out_with_workers();
        let list = JobListDepths::scan(view, &out, &mut self.rng);
        if !self.probing {
            let nodes = |d: u32| -> Vec<NodeBytes> {
                let picked = list.pick.get(&d).map_or(&[][..], Vec::as_slice);
                let node = |i: usize| match i.checked_sub(view.queued()) {
                    None => Some(view.pending_at(i)?.node.clone()),
                    Some(j) => Some(out.get(j)?.1.clone()),
                };
                picked.iter().filter_map(|&i| node(i)).collect()
            };
            let batch: Vec<_> =
                self.next_depths(&list).into_iter().map(|d| (d, nodes(d))).filter(|(_, n)| !n.is_empty()).collect();
            if !batch.is_empty() {
                self.probing = self.requests.send(batch).is_ok();
            }
        }
        self.job_list_guess(&list, nodes)
    }

    fn stratum(&self, depth: u32) -> Option<&Profile> {
        self.strata.get(&depth).map(|(_, sum)| sum).filter(|p| p.estimate.probes > 0)
    }

    /// Whether a depth needs probes before anything else: too few, or none lately.
    fn young(&self, depth: u32) -> bool {
        match self.strata.get(&depth) {
            Some((recent, sum)) => {
                sum.estimate.probes < MIN_PROBES || recent.back().is_none_or(|(t, _)| t.elapsed() > REFRESH)
            }
            None => true,
        }
    }

    /// The depths to probe next: those without enough probes or none lately (the shallowest first:
    /// their subtrees are the largest), else the one whose next probe shrinks the variance most
    /// (n_d² · se_d² / probes), or holds the most work among those the probes do not support.
    fn next_depths(&self, list: &JobListDepths) -> Vec<u32> {
        let young: Vec<u32> = list.count.keys().copied().filter(|&d| self.young(d)).take(BATCH).collect();
        if !young.is_empty() {
            return young;
        }
        let score = |(&d, &n): (&u32, &f64)| -> (bool, f64) {
            match self.stratum(d) {
                Some(p) if p.supported() => (false, n * n * p.estimate.std_error().powi(2) / p.estimate.probes as f64),
                Some(p) => (true, n * p.estimate.mean),
                None => (true, f64::INFINITY),
            }
        };
        let best = list.count.iter().max_by(|a, b| score(*a).partial_cmp(&score(*b)).unwrap_or(Ordering::Equal));
        best.map(|(&d, _)| d).into_iter().collect()
    }

    /// Σ n_d · mean_d over the depths of the subtrees not yet committed.
    fn job_list_guess(&self, list: &JobListDepths, nodes: f64) -> Guess {
        let queued: f64 = list.count.values().sum();
        if queued == 0.0 {
            // Nothing waits and nothing is out: the run is over (or not begun).
            return match nodes > 0.0 {
                true => Guess::Total { total: nodes, std_error: 0.0 },
                false => Guess::Unknown,
            };
        }
        let (mut left, mut variance) = (0.0, 0.0);
        for (d, &n) in &list.count {
            match (self.stratum(*d), self.strata.get(d)) {
                (Some(p), Some((batches, _))) if p.supported() => {
                    left += n * p.estimate.mean;
                    variance += (n * p.estimate.std_error().max(batch_error(batches))).powi(2);
                }
                _ => return Guess::Unknown,
            }
        }
        figure(nodes + left, variance.sqrt(), MAX_RELATIVE_ERROR)
    }
}

/// What the prober's probes cost, which it keeps to [`PROBER_SHARE`] of a core.
#[derive(Clone, Copy, Debug)]
enum ProbeClock {
    /// The prober thread's CPU time: on a loaded machine wall time also counts the time others
    /// held the core, and pacing by it starved the probes.
    ThreadCpu,
    /// Wall time, for probes that run in other processes (a legacy program): the thread only
    /// waits for them, and its CPU time would not count their work.
    Wall(Instant),
}

impl ProbeClock {
    fn for_searcher(searcher: &dyn Searcher) -> Self {
        match searcher.runs_elsewhere() {
            true => ProbeClock::Wall(Instant::now()),
            false => ProbeClock::ThreadCpu,
        }
    }

    /// The time on this clock, for the calling thread (a difference of two readings is a cost).
    fn now(self) -> Duration {
        match self {
            ProbeClock::ThreadCpu => thread_cpu(),
            ProbeClock::Wall(start) => start.elapsed(),
        }
    }
}

/// The CPU time of the calling thread (wall time where there is no such clock).
fn thread_cpu() -> Duration {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    match unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } {
        0 => Duration::new(t.tv_sec as u64, t.tv_nsec as u32),
        _ => START.get_or_init(Instant::now).elapsed(),
    }
}

/// The standard error of a depth's mean from the spread of its batches' means (batch means): the
/// nodes of a depth in the job list change from batch to batch as the run moves on, a spread that
/// the probes of one batch do not show.
fn batch_error(batches: &VecDeque<(Instant, Profile)>) -> f64 {
    let means: Vec<f64> = batches.iter().map(|(_, p)| p.estimate.mean).collect();
    if means.len() < 3 {
        return 0.0;
    }
    let k = means.len() as f64;
    let mean = means.iter().sum::<f64>() / k;
    (means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1.0) / k).sqrt()
}

/// Random polling: the tree's size from probes of the root, unless the nodes visited already
/// reach it: then the probes say nothing of what is left (a total raised to the count would read
/// "~100%, ETA 0 s" with a fifth of the tree to go).
fn whole_tree(root: &Profile, nodes: f64) -> Guess {
    let (total, se) = (root.estimate.mean, root.estimate.std_error());
    if !root.supported() || nodes >= total {
        return Guess::Unknown;
    }
    figure(total, se, MAX_ROOT_RELATIVE_ERROR)
}

fn figure(total: f64, std_error: f64, max_relative_error: f64) -> Guess {
    if 2.0 * std_error > max_relative_error * total {
        return Guess::Unknown;
    }
    Guess::Total { total, std_error }
}

/// How many subtrees wait to be committed at each depth, and a few of them at random for each
/// depth: the job list's nodes (indices below `queued`) and the start nodes of the jobs out with
/// workers (`queued + j` for the j-th): a job's nodes count only when its report commits them.
struct JobListDepths {
    count: BTreeMap<u32, f64>,
    /// Up to [`PICKS`] indices at each depth, uniformly chosen (reservoir sampling).
    pick: BTreeMap<u32, Vec<usize>>,
}

impl JobListDepths {
    fn scan(view: &dyn RunView, out: &[(u32, NodeBytes)], rng: &mut SplitMix64) -> Self {
        let queued = view.queued();
        let step = queued.div_ceil(SCAN).max(1);
        let mut seen: BTreeMap<u32, u64> = BTreeMap::new();
        let mut pick = BTreeMap::new();
        let listed = (0..queued).step_by(step).filter_map(|i| Some((i, view.pending_at(i)?.depth)));
        let flying = out.iter().enumerate().map(|(j, (depth, _))| (queued + j, *depth));
        for (i, depth) in listed.chain(flying) {
            let n = seen.entry(depth).or_default();
            *n += 1;
            let picked: &mut Vec<usize> = pick.entry(depth).or_default();
            if picked.len() < PICKS {
                picked.push(i);
            } else {
                let j = rng.below(*n as usize);
                if j < PICKS {
                    picked[j] = i;
                }
            }
        }
        // The job list is sampled every `step` nodes; the jobs out are all seen.
        let mut count: BTreeMap<u32, f64> = BTreeMap::new();
        for (depth, _) in out {
            *count.entry(*depth).or_default() += 1.0;
        }
        let listed: u64 = seen.values().sum::<u64>() - out.len() as u64;
        let scale = if listed == 0 { 0.0 } else { queued as f64 / listed as f64 };
        for (depth, n) in seen {
            let flying = count.get(&depth).copied().unwrap_or(0.0);
            count.insert(depth, (n as f64 - flying) * scale + flying);
        }
        Self { count, pick }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tree searched in this process is paced by the prober's CPU time, which does not move
    /// while others hold the core (as while asleep here); a legacy program by the wall clock, which
    /// counts the time the prober waits for the program's process.
    #[test]
    fn the_prober_is_paced_by_its_cpu_time_or_by_the_wall_for_a_legacy_program() {
        let registry = crate::registry::Registry::builtin();
        let build =
            |name, args: &[&str]| registry.build(&bts_protocol::TreeSpec::new(name, args.iter().copied())).unwrap();
        let (queens, exec) = (build("queens", &["--n", "6"]), build("exec", &["--", "true"]));
        let (cpu, wall) = (ProbeClock::for_searcher(&*queens), ProbeClock::for_searcher(&*exec));
        let (cpu_before, wall_before) = (cpu.now(), wall.now());
        std::thread::sleep(Duration::from_millis(100));
        let asleep = cpu.now().saturating_sub(cpu_before);
        assert!(asleep < Duration::from_millis(50), "{asleep:?} of CPU while asleep");
        assert!(wall.now().saturating_sub(wall_before) >= Duration::from_millis(100));
        let (before, started) = (cpu.now(), Instant::now());
        while started.elapsed() < Duration::from_millis(100) {
            std::hint::black_box(started.elapsed());
        }
        // Busy, the thread's time moves on (by less than the wall's if others share the core).
        assert!(cpu.now().saturating_sub(before) > Duration::from_millis(10));
    }

    /// Probes of a complete binary tree of 10 levels: every probe is exact (2047).
    fn exact_probes(n: u64) -> Profile {
        let levels: Vec<f64> = (0..=10).map(|k| f64::from(1u32 << k)).collect();
        let mut p = Profile::default();
        (0..n).for_each(|_| p.add(&levels));
        p
    }

    #[test]
    fn a_figure_needs_support_and_a_small_error() {
        assert_eq!(figure(100.0, 10.0, MAX_RELATIVE_ERROR), Guess::Total { total: 100.0, std_error: 10.0 });
        assert_eq!(figure(100.0, 30.0, MAX_RELATIVE_ERROR), Guess::Unknown, "±60% is no figure");
        // From the root's probes alone, ±20% at most.
        assert_eq!(figure(100.0, 11.0, MAX_ROOT_RELATIVE_ERROR), Guess::Unknown);
        assert_eq!(whole_tree(&exact_probes(40), 1000.0), Guess::Total { total: 2047.0, std_error: 0.0 });
        assert_eq!(whole_tree(&exact_probes(10), 1000.0), Guess::Unknown, "too few probes");
        // More nodes visited than the probes allow for: they were wrong.
        assert_eq!(whole_tree(&exact_probes(40), 5000.0), Guess::Unknown);
        // As many as they say: what is left is unknown, not nothing.
        assert_eq!(whole_tree(&exact_probes(40), 2047.0), Guess::Unknown);
    }
}
