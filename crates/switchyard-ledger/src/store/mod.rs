//! Durable storage on redb: the Raft log and vote ([`LogStore`]) and the state machine with
//! its snapshots ([`StateMachineStore`]). Both share one database file in the data dir; every
//! write that openraft waits on is a durable (fsync) commit before it is acknowledged.

mod db;
pub mod identity;
mod log_store;
mod state_machine;

pub use db::{StoreError, open_database};
pub use log_store::LogStore;
pub use state_machine::{StateMachineStore, StoreEvents};
