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
    /// The initial budget b.
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
    pub cost_nodes: f64,
    pub cost_ns: f64,
}

/// Weight of the newest job in the node-cost estimate.
const COST_DECAY: f64 = 1.0 / 32.0;
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
        let state = BudgetState { base: config.initial.max(1), cost_nodes: 0.0, cost_ns: 0.0 };
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
            return match self.config.maxd {
                Some(maxd) => Assignment { budget: Budget(b), max_depth: Some(depth.saturating_add(maxd)) },
                None => Assignment { budget: Budget((b / self.config.scale.max(1)).max(1)), max_depth: None },
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
        s.cost_nodes = s.cost_nodes * (1.0 - COST_DECAY) + visited as f64;
        s.cost_ns = s.cost_ns * (1.0 - COST_DECAY) + elapsed_ns.max(1) as f64;
        let ns_per_node = s.cost_ns / s.cost_nodes;
        let job_ns = self.config.target_job_ns.max(self.min_job_ns) as f64;
        let target = (job_ns / ns_per_node).round().clamp(1.0, MAX_ADAPTIVE_BUDGET as f64) as u64;
        // Move at most a factor 2 per job, so one odd measurement cannot swing b.
        s.base = target.clamp((s.base / 2).max(1), s.base.saturating_mul(2));
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
