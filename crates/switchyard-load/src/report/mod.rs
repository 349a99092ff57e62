//! The run's results: accumulated per attempt by [`Collector`], frozen into a [`LoadReport`].

mod breakdown;
mod collector;
mod load_report;
mod summary;

pub use breakdown::{BreakdownReport, TargetLoad};
pub use collector::{Collector, RequestId, RequestLabels, RunFacts};
pub use load_report::LoadReport;
pub use summary::{LatencySummary, WorkerLoad};
