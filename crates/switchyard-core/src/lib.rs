//! Core types shared by every Switchyard crate.
//!
//! This crate depends on nothing else in the workspace and carries no I/O: identifiers,
//! request tags, the quota-ledger trait that admission and the replicated ledger meet at,
//! and the injectable clock that time-based logic uses so tests can drive it deterministically.

mod clock;
pub mod header_names;
mod quota;
mod secret;
mod tags;
mod wall_clock;
mod worker_id;

pub use clock::{Clock, ManualClock, SystemClock};
pub use quota::{
    FleetLimit, QuotaError, QuotaLedger, QuotaScope, Reservation, ReserveFuture, SpendTags,
};
pub use secret::{REDACTED, Secret, with_secrets_exposed};
pub use tags::{ParseTagError, Priority, Purpose, RequestTags};
pub use wall_clock::WallClock;
pub use worker_id::WorkerId;
