//! Routing policies for Switchyard: given a request and the routable workers, pick one.
//!
//! - `consistent_hash`: the routing key ([`routing_key`]) on a ring of 256 virtual nodes per
//!   worker (placed by worker name, so replicas agree), bounded loads, hot keys spread over a
//!   few workers by a 30 s time-slice secondary hash.
//! - `cache_aware`: follows cached prompt prefixes (bounded radix tree; for a chat conversation,
//!   named by its opening with or without a session or user key, only prefixes the prompt
//!   continues count); everything else is placed by hashing the conversation (or else the
//!   routing key) onto the same ring (bounded load); affinity migrates off filtered holders
//!   and every deviation is announced as an [`AffinityEvent`] keyed by the routing key.
//! - `power_of_two`, `least_load`, `round_robin`.
//!
//! The gateway reports membership (`worker_added` / `worker_removed`), feeds affinity events
//! from other replicas to `apply_affinity`, and exports [`RoutingStats`] at scrape time; this
//! crate does no I/O and owns no metrics registry. Suggested metric names:
//! `switchyard_routing_ring_workers`, `switchyard_routing_ring_vnodes`,
//! `switchyard_routing_membership_changes_total`, `switchyard_routing_ring_keys_moved_ratio`,
//! `switchyard_routing_hot_keys_spread`, `switchyard_routing_hot_spread_decisions_total`,
//! `switchyard_routing_affinity_migrations_total`, `switchyard_routing_load_moves_total`,
//! `switchyard_routing_affinity_events_applied_total`,
//! `switchyard_routing_affinity_events_ignored_total`,
//! `switchyard_routing_placement_overrides`, `switchyard_routing_prefix_tree_bytes`,
//! `switchyard_routing_placement_replicas`, `switchyard_routing_openings_met_ratio`,
//! `switchyard_routing_plan_moved_ratio`, `switchyard_routing_plan_moved_beyond_membership_change_ratio`.

mod affinity;
mod build;
mod cache_aware;
mod config;
mod consistent_hash;
mod error;
mod hash;
mod hotspot;
mod least_load;
mod load;
mod membership;
mod policy;
mod power_of_two;
mod ring;
mod round_robin;
mod routing_key;

pub use affinity::{AffinityApplied, AffinityEvent, AffinityReason, AffinitySink, DiscardAffinity};
pub use build::{PolicyContext, build_policy};
pub use cache_aware::{CacheAwareConfig, CacheAwarePolicy, USER_TURN_MARKER};
pub use config::{POLICY_NAMES, RoutingConfig};
pub use consistent_hash::ConsistentHashPolicy;
pub use error::RouterError;
pub use hash::{stable_hash, stable_hash_seeded};
pub use hotspot::HotspotConfig;
pub use least_load::LeastLoadPolicy;
pub use policy::{
    Candidate, Decision, PrefixMatch, ReportedLoad, RouteRequest, RoutingPolicy, RoutingStats,
};
pub use power_of_two::PowerOfTwoPolicy;
pub use ring::ConsistentHashConfig;
pub use round_robin::RoundRobinPolicy;
pub use routing_key::{
    RoutingKey, RoutingKeyConfig, RoutingKeyInputs, RoutingKeySource, routing_key,
};
