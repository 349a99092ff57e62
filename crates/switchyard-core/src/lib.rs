//! Core types shared by every Switchyard crate.
//!
//! This crate depends on nothing else in the workspace and carries no I/O:
//! identifiers and the injectable clock that time-based logic uses so tests
//! can drive it deterministically.

mod clock;
mod worker_id;

pub use clock::{Clock, ManualClock, SystemClock};
pub use worker_id::WorkerId;
