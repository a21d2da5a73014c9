//! A read-only view of a run, whatever its mode, for progress displays, checkpoints and summaries.

use crate::{BudgetController, Order, Pending, Totals};
use bts_protocol::NodeBytes;

pub trait RunView {
    /// `budget` or `polling`.
    fn mode(&self) -> &'static str;

    /// Counters of committed work.
    fn totals(&self) -> &Totals;

    /// Nodes waiting: the job list (budget mode) or the workers' stacks (polling mode).
    fn queued(&self) -> usize;

    /// Jobs out with workers (budget mode).
    fn in_flight(&self) -> usize;

    /// Workers taking part now.
    fn workers(&self) -> usize;

    /// Workers with work.
    fn busy_workers(&self) -> usize;

    /// Worker threads that took part in the run, those that left included.
    fn workers_seen(&self) -> u64;

    /// The budget controller (budget mode).
    fn budget(&self) -> Option<&BudgetController>;

    /// The job order (budget mode).
    fn order(&self) -> Option<Order>;

    /// The most nodes that waited at once.
    fn peak_queued(&self) -> usize;

    /// Every node not yet visited, for a checkpoint (in polling mode, while the workers are paused).
    fn pending_jobs(&self) -> Vec<Pending>;

    /// The `i`-th waiting node, `i < queued()`, where the view can tell (for remaining-work
    /// estimates).
    fn pending_at(&self, i: usize) -> Option<&Pending>;

    /// The start nodes of the jobs out with workers and their depths (budget mode): subtrees not yet
    /// committed, like the job list's.
    fn out_with_workers(&self) -> Vec<(u32, NodeBytes)> {
        Vec::new()
    }

    /// Nodes of each job committed since the last tick.
    fn job_sizes(&self) -> &[u64];

    /// Every node was searched: the run is decided complete, its best records committed to an
    /// output that may still fail to take them.
    fn searched_all(&self) -> bool;
}
