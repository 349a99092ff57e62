//! The replicated quota ledger of a Switchyard gateway fleet.
//!
//! Every gateway replica runs a [`LedgerNode`]: an openraft node with durable storage in
//! redb, Raft RPCs over HTTP on its raft address, and a deterministic state machine
//! ([`state::LedgerState`]) that holds budgets, per-node **leases**, spend splits, the
//! override registry with its audit log, and prefix-affinity records.
//!
//! * The request hot path ([`LedgerQuota`], the `switchyard_core::QuotaLedger`) spends from
//!   this node's local lease under a short lock: no Raft round trip per request. Leases are
//!   counted against the budget when granted, so `spent + Σ unexpired holds ≤ limit` at every
//!   applied index and the fleet can never admit more than the budget, even split by a
//!   partition: a node that cannot reach a quorum spends only its current lease, then answers
//!   `Unavailable { reason: "quota_ledger_unreachable" }`.
//! * Ledger time is stamped into each entry by the proposing leader: its wall clock read once
//!   per term (at its first stamp, never below the ledger time already applied), then
//!   advanced by its monotonic clock, so a wall clock that steps during a term moves nothing
//!   (`node/ledger_time.rs`). The state machine never lets ledger time go backwards. Nodes
//!   stop spending a lease at `send time + ttl − safety margin` on their own monotonic clock.
//! * Writes sent to a follower are forwarded to the leader; reads for operators go through
//!   openraft's linearizable read path on the leader.
//!
//! ## Membership rule
//!
//! A group has **3 or 5 voters**; every further replica joins as a **learner** (it replicates
//! and serves its own hot path from leases, but does not vote). Bootstrap one node with
//! [`LedgerNode::initialize`] (or `initialize_single` for a one-node demo), add the others with
//! `add_learner`, then `promote` to reach 3 (or 5) voters. Promotion beyond
//! [`MAX_VOTERS`] is refused. Removing a voter is `remove`.

pub mod client;
pub mod codec;
pub mod command;
pub mod config;
pub mod error;
pub mod journal;
pub mod lease;
pub mod metrics;
pub mod network;
pub mod node;
pub mod quota;
pub mod raft_types;
pub mod spend;
pub mod state;
pub mod store;
pub mod view;

pub use client::LedgerClient;
pub use command::{BudgetSpec, Command, CommandResponse, NodeId, PoolId};
pub use config::{LeaseConfig, LedgerConfig, RaftTimings};
pub use error::LedgerError;
pub use lease::{LeaseSnapshot, LeaseTable, PENDING_REASON, UNREACHABLE_REASON};
pub use network::{FaultSwitch, PeerTls};
pub use node::reads::{BudgetStatus, ReadAnswer, ReadQuery};
pub use node::{ClusterStatus, LedgerNode, MAX_VOTERS, MembershipChange};
pub use quota::LedgerQuota;
pub use state::{AffinityRecord, AuditAction, AuditEntry, OverrideRecord, OverrideStatus};
