//! Durable storage on redb: the Raft log and vote ([`LogStore`]) and the state machine with
//! its snapshots ([`StateMachineStore`]). Both share one database file in the data dir; log
//! entries and the vote are durable (fsync) before openraft is told so (see `log_store`).

mod db;
mod flush_stall;
pub mod identity;
mod log_store;
mod state_machine;

pub use db::{StoreError, open_database};
pub use flush_stall::FlushStall;
pub use log_store::{LogFlushStats, LogStore};
pub use state_machine::{StateMachineStore, StoreEvents};
