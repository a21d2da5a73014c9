//! The bts master: the job list L, the budget controller, the scheduler (a state machine without
//! I/O) and the driver that connects it to workers.

mod best;
mod budget;
mod driver;
mod joblist;
pub mod net;
pub mod polling;
mod scheduler;
mod view;

pub use best::{Best, OptimumConfig};
pub use budget::{Assignment, BudgetConfig, BudgetController, BudgetState, CostModel};
pub use driver::{
    Discard, DriveOptions, Event, Link, Observer, Output, Plain, PollingRoutes, ProcessLink, SavePoint, WAVE_EVERY,
    drive, drive_polling,
};
pub use joblist::{JobList, Order, Pending, deal};
pub use scheduler::{Outcome, Place, Scheduler, SchedulerConfig, StopReason, Totals, Violation, WorkerId};
pub use view::RunView;
