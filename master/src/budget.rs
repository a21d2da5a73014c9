//! The budget controller: which budget and depth limit each job gets.
//!
//! Two mechanisms, both from mts/mplrs, and a third that makes the default need no tuning:
//! - while |L| > lmax·P (P = worker threads), jobs get b·scale, so that L stops growing;
//! - while |L| < lmin·P, jobs get the relative depth limit maxd when one is set, otherwise b/scale,
//!   so that jobs come back sooner and split the remaining work finer;
//! - unless the budget is fixed, the base budget b follows the measured cost of a node so that a job
//!   lasts about `target_job_ns` (or 20 round trips to the farthest remote worker, if longer): long enough that per-job costs vanish, short enough that idle workers
//!   soon get work and checkpoints drain quickly. The √b law of Avis & Devroye (a job returns about
//!   σ·sqrt(πb/8) nodes) is why this is safe: a budget 100 times larger returns only 10 times more
//!   nodes, so the job list stays populated over a wide range of budgets.
//!
//! `--fixed-budget` turns all of this off: every job gets b and no depth limit.

use bts_protocol::Budget;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetConfig {
    /// The initial budget b: the nodes a job visits (`u64::MAX` for no limit, as `--budget inf`;
    /// 0 is taken as 1).
    pub initial: u64,
    /// Never change b and never impose a depth limit.
    pub fixed: bool,
    /// The factor of the lmin and lmax rules.
    pub scale: u64,
    /// While |L| < lmin·P jobs are shortened.
    pub lmin: f64,
    /// While |L| > lmax·P jobs get b·scale (off when `None`).
    pub lmax: Option<f64>,
    /// The relative depth limit of jobs handed out while |L| < lmin·P.
    pub maxd: Option<u32>,
    /// The first job's depth limit.
    pub initial_depth: Option<u32>,
    /// The job duration the adaptive budget aims at, in nanoseconds.
    pub target_job_ns: u64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            initial: 100,
            fixed: false,
            scale: 100,
            lmin: 1.0,
            lmax: None,
            maxd: None,
            initial_depth: None,
            target_job_ns: 10_000_000,
        }
    }
}

/// A job's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Assignment {
    pub budget: Budget,
    /// Absolute depth limit.
    pub max_depth: Option<u32>,
}

/// The controller's state that survives a checkpoint.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetState {
    pub base: u64,
    pub cost: CostModel,
}

/// A job's time as a fixed cost plus a cost per node, `t = c + s·v`, fitted by least squares over
/// recent jobs (older jobs weigh less). The fixed cost is what restarting costs: a process to
/// start, a state to rebuild from the job's node; bts keeps jobs long enough to make it small.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    w: f64,
    v: f64,
    t: f64,
    vv: f64,
    vt: f64,
    /// How many times longer than the fixed-cost rule alone full jobs are made, so that the
    /// fixed cost of all jobs, small ones included, stays near 5% (1 when 0: not yet adapted).
    stretch: f64,
    /// The fitted fixed cost, averaged over recent jobs: when jobs are much longer than their
    /// fixed cost, noise can make a single fit see none, and b must not collapse for that.
    fixed_mean: f64,
}

impl CostModel {
    /// Adds a job that visited `visited` nodes in `ns` nanoseconds.
    pub fn add(&mut self, visited: f64, ns: f64) {
        let keep = 1.0 - COST_DECAY;
        self.w = self.w * keep + 1.0;
        self.v = self.v * keep + visited;
        self.t = self.t * keep + ns;
        self.vv = self.vv * keep + visited * visited;
        self.vt = self.vt * keep + visited * ns;
    }

    /// (fixed nanoseconds per job, nanoseconds per node), or `None` when the jobs' sizes hardly
    /// vary (or the times do not grow with them): then the two cannot be told apart.
    pub fn fit(&self) -> Option<(f64, f64)> {
        let spread = self.w * self.vv - self.v * self.v;
        if spread > 0.01 * self.w * self.vv {
            let per_node = (self.w * self.vt - self.v * self.t) / spread;
            if per_node > 0.0 {
                return Some((((self.t - per_node * self.v) / self.w).max(0.0), per_node));
            }
        }
        None
    }

    /// The mean size and the mean time of recent jobs.
    fn means(&self) -> (f64, f64) {
        (self.v / self.w.max(1e-9), self.t / self.w.max(1e-9))
    }

    /// The fewest nodes a job needs for its node cost to reach its fixed cost (1 when unknown).
    fn break_even(&self) -> u64 {
        self.fit()
            .map_or(1, |(fixed, per_node)| (fixed / per_node).ceil().clamp(1.0, MAX_ADAPTIVE_BUDGET as f64) as u64)
    }
}

/// Weight of the newest job in the node-cost estimate.
const COST_DECAY: f64 = 1.0 / 32.0;
/// Jobs last at least this many times their fixed cost.
const FIXED_COST_SHARE: f64 = 19.0;
/// Full jobs are stretched at most this many times for the sake of small ones.
const MAX_STRETCH: f64 = 4.0;
/// The adaptive budget never grows past this (a job of 10^12 nodes is days of work anyway).
const MAX_ADAPTIVE_BUDGET: u64 = 1 << 40;

#[derive(Clone, Debug)]
pub struct BudgetController {
    config: BudgetConfig,
    state: BudgetState,
    /// Jobs should last at least this long (a multiple of the round trip to remote workers).
    min_job_ns: u64,
}

impl BudgetController {
    pub fn new(config: BudgetConfig) -> Self {
        let state = BudgetState { base: config.initial.max(1), cost: CostModel::default() };
        Self { config, state, min_job_ns: 0 }
    }

    /// A controller that carries on from a saved state with a (possibly changed) configuration.
    pub fn resume(config: BudgetConfig, state: BudgetState) -> Self {
        let mut c = Self::new(config);
        if !c.config.fixed {
            c.state = state;
        }
        c
    }

    pub fn config(&self) -> &BudgetConfig {
        &self.config
    }

    pub fn state(&self) -> &BudgetState {
        &self.state
    }

    /// The base budget b.
    pub fn base(&self) -> u64 {
        self.state.base
    }

    /// Limits of the run's first job, at depth 0.
    pub fn first_job(&self) -> Assignment {
        let max_depth = if self.config.fixed { None } else { self.config.initial_depth };
        Assignment { budget: Budget(self.state.base), max_depth }
    }

    /// Limits of a job at `depth` handed out while `queued` jobs wait and `threads` work.
    pub fn assign(&self, depth: u32, queued: usize, threads: usize) -> Assignment {
        let b = self.state.base;
        if self.config.fixed {
            return Assignment { budget: Budget(b), max_depth: None };
        }
        let threads = threads.max(1) as f64;
        let queued = queued as f64;
        if queued < self.config.lmin * threads {
            // Shorter jobs split the remaining work finer, but not so short that the fixed cost
            // of a job (a process to start) outweighs its nodes.
            let short = (b / self.config.scale.max(1)).max(self.state.cost.break_even()).min(b);
            return match self.config.maxd {
                Some(maxd) => Assignment { budget: Budget(b), max_depth: Some(depth.saturating_add(maxd)) },
                None => Assignment { budget: Budget(short.max(1)), max_depth: None },
            };
        }
        if let Some(lmax) = self.config.lmax
            && queued > lmax * threads
        {
            return Assignment { budget: Budget(b.saturating_mul(self.config.scale)), max_depth: None };
        }
        Assignment { budget: Budget(b), max_depth: None }
    }

    /// Jobs should last at least `ns` (remote workers far away).
    pub fn set_min_job_ns(&mut self, ns: u64) {
        self.min_job_ns = ns;
    }

    /// Learns from a finished job: it visited `visited` nodes in `elapsed_ns`.
    pub fn observe(&mut self, visited: u64, elapsed_ns: u64) {
        if self.config.fixed || visited == 0 {
            return;
        }
        let s = &mut self.state;
        s.cost.add(visited as f64, elapsed_ns.max(1) as f64);
        let job_ns = self.config.target_job_ns.max(self.min_job_ns) as f64;
        let target = match s.cost.fit() {
            // A job lasts the target time, and long enough that its fixed cost stays near 5%.
            Some((fitted_ns, ns_per_node)) => {
                let c = &mut s.cost;
                c.fixed_mean = if c.fixed_mean == 0.0 {
                    fitted_ns
                } else {
                    c.fixed_mean + COST_DECAY * (fitted_ns - c.fixed_mean)
                };
                let fixed_ns = fitted_ns.max(c.fixed_mean);
                // Jobs that end early (small subtrees) pay the fixed cost too, and by the √b law
                // there are fewer of them per node in longer jobs: stretch full jobs, slowly,
                // while the fixed cost's share of all recent jobs stays above 5%.
                let share = fixed_ns / s.cost.means().1 * (FIXED_COST_SHARE + 1.0);
                let step = share.clamp(0.5, 2.0).powf(COST_DECAY);
                s.cost.stretch = (s.cost.stretch.max(1.0) * step).clamp(1.0, MAX_STRETCH);
                job_ns.max(FIXED_COST_SHARE * s.cost.stretch * fixed_ns) / ns_per_node
            }
            None => {
                // Jobs of one size: if all their time were node cost, b would be job_ns / (t / v).
                // If that is much less than v, the time may as well be a fixed cost (a process
                // start) that shorter jobs cannot shrink: keep b, and try jobs twice as large as
                // this one, which tells the two apart and costs at most one job twice as long.
                let (v, t) = s.cost.means();
                let all_nodes = job_ns / (t / v.max(1e-9));
                if all_nodes < v / 2.0 { (2.0 * visited as f64).max(s.base as f64) } else { all_nodes }
            }
        };
        let target = target.round().clamp(1.0, MAX_ADAPTIVE_BUDGET as f64) as u64;
        // Move at most a factor 2 per job, so one odd measurement cannot swing b; from an
        // unlimited b (--budget inf), which is no size to move from, straight to the measure.
        s.base = match Budget(s.base).is_unlimited() {
            true => target,
            false => target.clamp((s.base / 2).max(1), s.base.saturating_mul(2)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adaptive() -> BudgetController {
        BudgetController::new(BudgetConfig::default())
    }

    #[test]
    fn fixed_budget_never_changes_and_never_limits_depth() {
        let config = BudgetConfig {
            fixed: true,
            initial: 7,
            initial_depth: Some(2),
            maxd: Some(1),
            lmax: Some(1.0),
            ..Default::default()
        };
        let mut c = BudgetController::new(config);
        assert_eq!(c.first_job(), Assignment { budget: Budget(7), max_depth: None });
        for _ in 0..100 {
            c.observe(7, 1);
        }
        for queued in [0, 1, 1000] {
            assert_eq!(c.assign(5, queued, 2), Assignment { budget: Budget(7), max_depth: None });
        }
    }

    /// An unlimited first budget is no size to halve from: the first measure sets b.
    #[test]
    fn an_unlimited_adaptive_budget_takes_the_first_measure() {
        let mut c = BudgetController::new(BudgetConfig { initial: u64::MAX, ..Default::default() });
        // 100 ns a node and a 10 ms target: 100,000 nodes.
        c.observe(1000, 100_000);
        let b = c.base();
        assert!((90_000..=110_000).contains(&b), "b = {b}");
    }

    #[test]
    fn adaptive_budget_converges_to_the_target_job_time() {
        // 100 ns a node and a 10 ms target: 100,000 nodes.
        let mut c = adaptive();
        for _ in 0..200 {
            let b = c.base();
            c.observe(b, b * 100);
        }
        let b = c.base();
        assert!((90_000..=110_000).contains(&b), "b = {b}");
        // Nodes ten times dearer: b falls to a tenth.
        for _ in 0..400 {
            let b = c.base();
            c.observe(b, b * 1000);
        }
        let b = c.base();
        assert!((9_000..=11_000).contains(&b), "b = {b}");
    }

    #[test]
    fn a_fixed_cost_per_job_makes_jobs_longer() {
        // 30 ms to start a process, then 1 ms a node: jobs of about 19 * 30 ms = 570 ms of nodes,
        // stretched 4 times since here most jobs end early whatever b is (their subtrees are
        // small), so the fixed cost's share of all jobs stays high.
        let mut c = adaptive();
        for i in 0..500u64 {
            // Jobs end early on small subtrees, so their sizes vary.
            let visited = c.base().min(1 + (i * 7919) % 1000);
            c.observe(visited, 30_000_000 + visited * 1_000_000);
        }
        let (fixed, per_node) = c.state().cost.fit().unwrap();
        assert!((fixed - 30e6).abs() < 1e3 && (per_node - 1e6).abs() < 1.0, "{fixed} {per_node}");
        assert!((2240..=2320).contains(&c.base()), "b = {}", c.base());
    }

    /// A one-shot program: 0.3 s to start a process, 10 µs a node, every time off by up to ±40%
    /// (a loaded machine). Jobs visit their whole budget (a large tree). For `short_jobs` jobs the
    /// job list is short (every job cut to b/scale). Returns the controller after `total` jobs and
    /// the fixed cost's share of the time of the second half of the jobs.
    fn one_shot_run(seed: u64, short_jobs: usize, total: usize, mut c: BudgetController) -> (BudgetController, f64) {
        let mut rng = seed;
        let mut noise = || {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            0.6 + 0.8 * ((rng >> 11) as f64 / (1u64 << 53) as f64)
        };
        let (mut fixed, mut all) = (0.0, 0.0);
        for i in 0..total {
            let queued = if i < short_jobs { 0 } else { 100 };
            let v = c.assign(3, queued, 2).budget.0;
            let start = 0.3e9 * noise();
            let ns = start + v as f64 * 10_000.0 * noise();
            if i >= total / 2 {
                (fixed, all) = (fixed + start, all + ns);
            }
            c.observe(v, ns as u64);
        }
        (c, fixed / all)
    }

    #[test]
    fn one_shot_jobs_grow_past_a_budget_of_one_from_any_start() {
        // The fixed cost rules: jobs of 19 × 0.3 s of nodes, 570,000 nodes.
        for seed in 0..20 {
            // The first jobs cut to b/scale = 1 while the job list is short.
            let (c, share) = one_shot_run(seed, 10, 80, adaptive());
            assert!(share < 0.10, "seed {seed}: the fixed cost took {share:.3} of the time");
            // b stays near the 5% point (570,000 nodes, stretched) despite the noise.
            assert!(c.base() > 100_000, "seed {seed}: b = {}", c.base());
            // Short jobs are not cut below the break-even size (about 30,000 nodes, as the noisy
            // fit sees it).
            let short = c.assign(3, 0, 2).budget.0;
            assert!(short >= 1_000, "seed {seed}: a short job of {short}");
            // From b = 1 after only jobs of one node (where the controller used to lock).
            let mut cost = CostModel::default();
            for _ in 0..300 {
                cost.add(1.0, 0.3e9);
            }
            let locked = BudgetController::resume(BudgetConfig::default(), BudgetState { base: 1, cost });
            let (c, share) = one_shot_run(seed, 0, 80, locked);
            assert!(share < 0.10, "seed {seed}: the fixed cost took {share:.3} of the time after a lock");
            assert!(c.base() > 100_000, "seed {seed}: b = {} after a lock", c.base());
        }
    }

    #[test]
    fn a_small_fixed_cost_leaves_the_target_job_time() {
        // 1 µs a job and 70 ns a node: the 10 ms target rules, about 142,857 nodes.
        let mut c = adaptive();
        for i in 0..2000u64 {
            let visited = c.base().min(1 + (i * 104_729) % 200_000);
            c.observe(visited, 1_000 + visited * 70);
        }
        assert!((140_000..=146_000).contains(&c.base()), "b = {}", c.base());
    }

    #[test]
    fn slow_nodes_get_tiny_budgets() {
        // 5 ms a node: a 10 ms job is two nodes.
        let mut c = adaptive();
        for _ in 0..100 {
            let b = c.base();
            c.observe(b, b * 5_000_000);
        }
        assert_eq!(c.base(), 2);
    }

    #[test]
    fn mplrs_rules_follow_the_list_size() {
        let config =
            BudgetConfig { initial: 1000, scale: 10, lmin: 1.0, lmax: Some(3.0), maxd: Some(2), ..Default::default() };
        let c = BudgetController::new(config);
        // 4 threads: |L| < 4 → depth limit; |L| > 12 → b·scale; otherwise b.
        assert_eq!(c.assign(5, 3, 4), Assignment { budget: Budget(1000), max_depth: Some(7) });
        assert_eq!(c.assign(5, 4, 4), Assignment { budget: Budget(1000), max_depth: None });
        assert_eq!(c.assign(5, 12, 4), Assignment { budget: Budget(1000), max_depth: None });
        assert_eq!(c.assign(5, 13, 4), Assignment { budget: Budget(10_000), max_depth: None });
    }

    #[test]
    fn starving_without_maxd_shortens_jobs() {
        let c = BudgetController::new(BudgetConfig { initial: 1000, scale: 100, ..Default::default() });
        assert_eq!(c.assign(0, 0, 2).budget, Budget(10));
        assert_eq!(c.assign(0, 2, 2).budget, Budget(1000));
    }

    #[test]
    fn first_job_gets_the_initial_depth() {
        let c = BudgetController::new(BudgetConfig { initial_depth: Some(3), ..Default::default() });
        assert_eq!(c.first_job().max_depth, Some(3));
    }
}
