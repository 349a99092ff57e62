//! Fault injection: what can go wrong ([`Fault`]), when ([`Schedule`]), and the primitives
//! that make it happen to real processes and links.

pub mod clock_skew;
pub mod command;
mod fault;
pub mod netns;
pub mod partition;
pub mod process;
pub mod proxy;
pub mod schedule;

pub use fault::{Fault, NemesisKind, PartitionShape, Target, UnknownNemesis};
pub use partition::PartitionPlan;
pub use schedule::{Schedule, ScheduleConfig, ScheduledFault};
