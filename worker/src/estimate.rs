//! Knuth's tree-size estimator: a random probe from a node to a leaf, taking a uniformly random
//! child at every step, estimates the subtree's size by 1 + d1 + d1·d2 + … (d_i: the number of
//! children met at step i). The estimate is unbiased; its variance can be enormous on heavy-tailed
//! trees, which the standard error of many probes shows.
//!
//! Probes work through any [`JobRunner`]: a job with budget 1 visits its node and returns all of its
//! children, so the same code probes built-in trees, trees of a library user and legacy programs.
//! A program with a soft budget (lrs) may finish some children itself instead of returning them:
//! those are leaves, and count among the children met.

use crate::JobRunner;
use bts_protocol::{Budget, Job, JobFailure, JobId, NodeBytes, ReportBatch};

/// SplitMix64: small, fast and good enough to choose children.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform integer below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }
}

/// One probe from `node` (at `depth`): returns Knuth's estimate of its subtree's size. `choose(d)`
/// picks which of `d` children to descend into.
pub fn probe(
    runner: &mut dyn JobRunner,
    node: NodeBytes,
    depth: u32,
    choose: &mut dyn FnMut(usize) -> usize,
) -> Result<f64, JobFailure> {
    probe_levels(runner, node, depth, choose, &mut Vec::new())
}

/// [`probe`], also leaving in `levels` the weight of each level below `node` (1, d1, d1·d2, …):
/// their sum is the estimate, and level k's weight estimates the nodes k levels down.
pub fn probe_levels(
    runner: &mut dyn JobRunner,
    node: NodeBytes,
    depth: u32,
    choose: &mut dyn FnMut(usize) -> usize,
    levels: &mut Vec<f64>,
) -> Result<f64, JobFailure> {
    levels.clear();
    let mut batch = ReportBatch::default();
    let (mut node, mut depth) = (node, depth);
    let (mut estimate, mut weight) = (0.0f64, 1.0f64);
    loop {
        estimate += weight;
        levels.push(weight);
        batch.clear();
        let job = Job { id: JobId(0), depth, budget: Budget(1), max_depth: None, node, incumbent: Default::default() };
        runner.run(&job, &mut batch)?;
        let returned = batch.returned.len();
        let finished = batch.reports.last().map_or(0, |r| r.visited.saturating_sub(1)) as usize;
        let d = returned + finished;
        if d == 0 {
            return Ok(estimate);
        }
        weight *= d as f64;
        let k = choose(d).min(d - 1);
        if k >= returned {
            // A leaf child the job finished itself.
            return Ok(estimate + weight);
        }
        let next = batch.returned.swap_remove(k);
        (node, depth) = (next.node, next.depth);
    }
}

/// Running mean and variance of probe estimates (Welford), mergeable across threads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Estimate {
    pub probes: u64,
    pub mean: f64,
    m2: f64,
    /// The largest single probe: on heavy-tailed trees a few probes carry the estimate.
    pub max: f64,
}

impl Estimate {
    pub fn add(&mut self, x: f64) {
        self.probes += 1;
        let delta = x - self.mean;
        self.mean += delta / self.probes as f64;
        self.m2 += delta * (x - self.mean);
        self.max = self.max.max(x);
    }

    pub fn merge(&mut self, other: &Estimate) {
        if other.probes == 0 {
            return;
        }
        let n = (self.probes + other.probes) as f64;
        let delta = other.mean - self.mean;
        self.mean += delta * other.probes as f64 / n;
        self.m2 += other.m2 + delta * delta * self.probes as f64 * other.probes as f64 / n;
        self.probes += other.probes;
        self.max = self.max.max(other.max);
    }

    /// The standard error of the mean.
    pub fn std_error(&self) -> f64 {
        if self.probes < 2 {
            return f64::INFINITY;
        }
        (self.m2 / (self.probes - 1) as f64 / self.probes as f64).sqrt()
    }
}

/// Probes that reach a level fewer times than this say little about it.
const MIN_REACH: u64 = 10;
/// An estimate is supported when levels reached by fewer than [`MIN_REACH`] probes carry at most
/// this share of it.
const MAX_UNSEEN_SHARE: f64 = 0.1;
/// And when it rests on at least this many probes.
pub const MIN_PROBES: u64 = 30;
/// And when no single probe carries more than this share of the sum: on a log-normally heavy tree
/// (products of many random numbers of children) the mean of a few thousand probes hangs on the
/// largest of them, and the standard error of the sample is far too small.
const MAX_LARGEST_SHARE: f64 = 0.1;

/// Probes of one subtree (or of subtrees alike), level by level, to tell whether they support a
/// figure at all.
///
/// Knuth's estimate is the sum over levels k of the mean weight of level k. On a heavy-tailed tree
/// (a critical branching process: binomial UTS, critical Galton-Watson) every level carries about
/// the same weight, so the levels that only one or two lucky probes reached carry much of the
/// estimate, and the levels no probe reached carry the rest of the true size: the mean is then
/// typically far below the size, and its standard error is just as wrong. A tree whose weight sits
/// in levels that many probes reached (queens; UTS geometric trees with enough probes) gives a
/// figure whose standard error means what it says, once no single probe dominates the sum.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Profile {
    pub estimate: Estimate,
    /// Probes that reached level k (k = 0: all of them).
    reached: Vec<u64>,
    /// The sum over probes of level k's weight.
    weight: Vec<f64>,
}

impl Profile {
    /// Adds a probe, given by the weights of its levels ([`probe_levels`]).
    pub fn add(&mut self, levels: &[f64]) {
        self.estimate.add(levels.iter().sum());
        if self.reached.len() < levels.len() {
            self.reached.resize(levels.len(), 0);
            self.weight.resize(levels.len(), 0.0);
        }
        for (k, w) in levels.iter().enumerate() {
            self.reached[k] += 1;
            self.weight[k] += w;
        }
    }

    pub fn merge(&mut self, other: &Profile) {
        self.estimate.merge(&other.estimate);
        if self.reached.len() < other.reached.len() {
            self.reached.resize(other.reached.len(), 0);
            self.weight.resize(other.reached.len(), 0.0);
        }
        for k in 0..other.reached.len() {
            self.reached[k] += other.reached[k];
            self.weight[k] += other.weight[k];
        }
    }

    /// The share of the estimate carried by levels that fewer than `MIN_REACH` (10) probes reached.
    pub fn unseen_share(&self) -> f64 {
        let total: f64 = self.weight.iter().sum();
        if total <= 0.0 {
            return 1.0;
        }
        let thin: f64 = self.weight.iter().zip(&self.reached).filter(|&(_, &r)| r < MIN_REACH).map(|(w, _)| w).sum();
        thin / total
    }

    /// Whether the probes support the estimate (see the type's documentation).
    pub fn supported(&self) -> bool {
        let e = &self.estimate;
        e.probes >= MIN_PROBES
            && self.unseen_share() <= MAX_UNSEEN_SHARE
            && e.max <= MAX_LARGEST_SHARE * e.mean * e.probes as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::Explicit;
    use crate::{RunnerSettings, Searcher, TreeSearcher};

    /// 0 ─┬─ 1 ─┬─ 2
    ///    │     └─ 3 ─── 4
    ///    ├─ 5
    ///    └─ 6 ─┬─ 7
    ///          ├─ 8
    ///          └─ 9 ─── 10 ─── 11
    fn lopsided() -> Explicit {
        let mut c = vec![Vec::new(); 12];
        c[0] = vec![1, 5, 6];
        c[1] = vec![2, 3];
        c[3] = vec![4];
        c[6] = vec![7, 8, 9];
        c[9] = vec![10];
        c[10] = vec![11];
        Explicit(c)
    }

    /// The exact expectation of the estimator: every sequence of choices, weighted by its
    /// probability.
    fn expectation(runner: &mut dyn JobRunner, root: NodeBytes, path: &mut Vec<usize>) -> f64 {
        // Probe with the choices in `path`, then the first child: learn how many children the
        // next step offers by recording it.
        let mut offered = Vec::new();
        let mut step = 0;
        let value = probe(runner, root.clone(), 0, &mut |d| {
            offered.push(d);
            let c = path.get(step).copied().unwrap_or(0);
            step += 1;
            c
        })
        .unwrap();
        if offered.len() == path.len() {
            // A complete path: its probability is the product of 1/d along it.
            let p: f64 = offered.iter().map(|&d| 1.0 / d as f64).product();
            return p * value;
        }
        let d = offered[path.len()];
        (0..d)
            .map(|c| {
                path.push(c);
                let e = expectation(runner, root.clone(), path);
                path.pop();
                e
            })
            .sum()
    }

    #[test]
    fn the_estimator_is_unbiased_exactly() {
        let searcher = TreeSearcher::new(lopsided());
        let mut runner = searcher.runner(RunnerSettings::default()).unwrap();
        let e = expectation(&mut *runner, searcher.root().unwrap(), &mut Vec::new());
        assert!((e - 12.0).abs() < 1e-9, "expectation {e}");
    }

    /// A soft-budget runner as lrs is: a budget-1 job finishes its leaf children itself, counting
    /// them as visited, and returns only the others.
    struct FinishesLeaves(Box<dyn JobRunner>);

    impl JobRunner for FinishesLeaves {
        fn run(&mut self, job: &Job, batch: &mut ReportBatch) -> Result<(), JobFailure> {
            self.0.run(job, batch)?;
            let children = std::mem::take(&mut batch.returned);
            let mut leaves = 0;
            for child in children {
                let mut probe = ReportBatch::default();
                let leaf = Job { depth: child.depth, node: child.node.clone(), ..job.clone() };
                self.0.run(&leaf, &mut probe)?;
                if probe.returned.is_empty() {
                    leaves += 1;
                } else {
                    batch.returned.push(child);
                }
            }
            let report = batch.reports.last_mut().expect("one report");
            report.visited += leaves;
            report.returned = batch.returned.len() as u32;
            Ok(())
        }
    }

    #[test]
    fn the_estimator_is_unbiased_when_jobs_finish_leaf_children() {
        let searcher = TreeSearcher::new(lopsided());
        let mut runner = FinishesLeaves(searcher.runner(RunnerSettings::default()).unwrap());
        let e = expectation(&mut runner, searcher.root().unwrap(), &mut Vec::new());
        assert!((e - 12.0).abs() < 1e-9, "expectation {e}");
    }

    #[test]
    fn many_probes_converge_to_the_size() {
        let searcher = TreeSearcher::new(lopsided());
        let mut runner = searcher.runner(RunnerSettings::default()).unwrap();
        let mut rng = SplitMix64::new(7);
        let mut est = Estimate::default();
        for _ in 0..20_000 {
            est.add(probe(&mut *runner, searcher.root().unwrap(), 0, &mut |d| rng.below(d)).unwrap());
        }
        assert!((est.mean - 12.0).abs() < 4.0 * est.std_error(), "{est:?} ± {}", est.std_error());
        // Probe values for this tree: 1+3+6=10, 1+3+6+6=16, 1+3=4, 1+3+9=13, 1+3+9+9+9=31.
        assert_eq!(est.max, 31.0);
    }

    /// A complete binary tree of `depth` levels below the root (node: its depth).
    struct Binary(u32);

    impl crate::Tree for Binary {
        type Node = u32;
        type Children<'a> = std::vec::IntoIter<u32>;
        fn root(&self) -> u32 {
            0
        }
        fn children(&self, node: &u32, _depth: u32) -> Self::Children<'_> {
            if *node < self.0 { vec![node + 1, node + 1].into_iter() } else { Vec::new().into_iter() }
        }
    }

    /// In a critical tree every level weighs the same, and the deep ones are reached by a few probes
    /// only; a complete tree is reached to the bottom by every probe.
    #[test]
    fn levels_reached_by_few_probes_leave_the_estimate_unsupported() {
        let mut critical = Profile::default();
        let mut rng = SplitMix64::new(3);
        for _ in 0..1000 {
            // A probe of a critical binary branching process: 0 or 2 children with equal odds.
            let mut levels = vec![1.0];
            while rng.below(2) == 1 {
                let w = levels.last().unwrap() * 2.0;
                levels.push(w);
            }
            critical.add(&levels);
        }
        assert!(!critical.supported(), "unseen share {}", critical.unseen_share());

        let searcher = TreeSearcher::new(Binary(12));
        let mut runner = searcher.runner(RunnerSettings::default()).unwrap();
        let (mut full, mut levels) = (Profile::default(), Vec::new());
        for _ in 0..40 {
            probe_levels(&mut *runner, searcher.root().unwrap(), 0, &mut |d| rng.below(d), &mut levels).unwrap();
            full.add(&levels);
        }
        assert_eq!(full.unseen_share(), 0.0);
        assert!(full.supported());
        assert_eq!(full.estimate.mean, 8191.0, "every probe of a complete tree is exact");
        let mut halves = full.clone();
        halves.merge(&full);
        assert_eq!((halves.estimate.probes, halves.reached[12]), (80, 80));
        assert!(!Profile::default().supported());
    }

    #[test]
    fn merged_estimates_equal_one_pass() {
        let xs: Vec<f64> = (0..100).map(|i| ((i * 37) % 11) as f64 * 1.5).collect();
        let mut whole = Estimate::default();
        xs.iter().for_each(|&x| whole.add(x));
        let (mut a, mut b) = (Estimate::default(), Estimate::default());
        xs[..30].iter().for_each(|&x| a.add(x));
        xs[30..].iter().for_each(|&x| b.add(x));
        a.merge(&b);
        assert_eq!(a.probes, whole.probes);
        assert!((a.mean - whole.mean).abs() < 1e-12 && (a.std_error() - whole.std_error()).abs() < 1e-12);
    }
}
