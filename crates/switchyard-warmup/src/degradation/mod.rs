//! Graded degradation: levels 0–3 driven by the budget water level and the
//! overload detector, one level at a time, recovering one level per 5 min at most; every
//! action of a level must succeed (through the gateway's [`ActionExecutor`]) or the level
//! is marked failed and alerts; operators force and release levels and run drills, all
//! audited. The request path reads [`DegradationView`] through a [`ViewReader`].

mod actions;
mod audit;
mod controller;
mod drill;
mod effects;
pub(crate) mod level;
mod metrics;
mod signals;
mod step;
mod view;

pub use actions::{ActionExecutor, DegradationAction};
pub use audit::{AuditEntry, AuditKind};
pub use controller::{
    ActionReport, DegradationController, DegradationStatus, Evaluation, ForceReport, StepReport,
};
pub use drill::{DETECT_DEADLINE_MS, DrillReport};
pub use effects::{CallerPolicy, Effects, ServeMode};
pub use level::{Level, LevelCause};
pub use signals::{OverloadState, Signals, caller_level, level_cause, target_level};
pub use view::{
    CallerSignals, DegradationView, Forced, LevelFailure, RequestVerdict, Verdict, ViewReader,
};
