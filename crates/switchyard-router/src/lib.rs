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
pub use cache_aware::{CacheAwareConfig, CacheAwarePolicy, USER_TURN_MARKER};
pub use config::{ConsistentHashConfig, RoutingConfig};
pub use consistent_hash::ConsistentHashPolicy;
pub use error::RouterError;
pub use hash::{stable_hash, stable_hash_seeded};
pub use hotspot::HotspotConfig;
pub use least_load::LeastLoadPolicy;
pub use policy::{
    Candidate, Decision, PrefixMatch, ReportedLoad, RouteRequest, RoutingPolicy, RoutingStats,
};
pub use power_of_two::PowerOfTwoPolicy;
pub use round_robin::RoundRobinPolicy;
pub use routing_key::{
    RoutingKey, RoutingKeyConfig, RoutingKeyInputs, RoutingKeySource, routing_key,
};
use switchyard_core::WallClock;

use std::sync::Arc;

/// Every name [`build_policy`] accepts.
pub const POLICY_NAMES: &[&str] = &[
    RoundRobinPolicy::NAME,
    CacheAwarePolicy::NAME,
    ConsistentHashPolicy::NAME,
    PowerOfTwoPolicy::NAME,
    LeastLoadPolicy::NAME,
];

/// What a policy needs from its surroundings besides its config.
#[derive(Clone)]
pub struct PolicyContext {
    pub clock: WallClock,
    /// Receives cache_aware's affinity events.
    pub affinity_sink: Arc<dyn AffinitySink>,
}

impl Default for PolicyContext {
    /// The system clock, and events discarded.
    fn default() -> Self {
        Self {
            clock: WallClock::system(),
            affinity_sink: Arc::new(DiscardAffinity),
        }
    }
}

/// Validates the whole config, then builds the policy named by `config.policy`.
pub fn build_policy(
    config: &RoutingConfig,
    context: PolicyContext,
) -> Result<Arc<dyn RoutingPolicy>, RouterError> {
    config.validate()?;
    Ok(match config.policy.as_str() {
        RoundRobinPolicy::NAME => Arc::new(RoundRobinPolicy::new()),
        CacheAwarePolicy::NAME => Arc::new(CacheAwarePolicy::new(
            config.cache_aware.clone(),
            &config.consistent_hash,
            config.routing_key.clone(),
            context.clock,
            context.affinity_sink,
        )?),
        ConsistentHashPolicy::NAME => Arc::new(ConsistentHashPolicy::new(
            config.consistent_hash.clone(),
            config.hotspot.clone(),
            config.routing_key.clone(),
            context.clock,
        )),
        PowerOfTwoPolicy::NAME => Arc::new(PowerOfTwoPolicy::new()),
        LeastLoadPolicy::NAME => Arc::new(LeastLoadPolicy::new()),
        unknown => {
            return Err(RouterError::UnknownPolicy {
                name: unknown.to_owned(),
                valid: POLICY_NAMES,
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(policy: &str) -> RoutingConfig {
        RoutingConfig {
            policy: policy.into(),
            ..Default::default()
        }
    }

    #[test]
    fn builds_every_listed_policy_under_its_name() {
        for &name in POLICY_NAMES {
            let policy = build_policy(&named(name), PolicyContext::default()).unwrap();
            assert_eq!(policy.name(), name);
            assert!(!policy.branches().is_empty());
        }
    }

    #[test]
    fn unknown_policy_error_lists_valid_names() {
        let error = build_policy(&named("nope"), PolicyContext::default())
            .err()
            .unwrap();
        assert!(matches!(&error, RouterError::UnknownPolicy { name, .. } if name == "nope"));
        let message = error.to_string();
        assert!(message.contains("nope"), "{message}");
        for name in POLICY_NAMES {
            assert!(message.contains(name), "{message}");
        }
    }

    #[test]
    fn any_invalid_section_is_rejected_whatever_the_policy() {
        let mut config = named("round_robin");
        config.cache_aware.max_tree_bytes = 0;
        let error = build_policy(&config, PolicyContext::default())
            .err()
            .unwrap();
        assert!(
            error.to_string().contains("cache_aware.max_tree_bytes"),
            "{error}"
        );
    }
}
