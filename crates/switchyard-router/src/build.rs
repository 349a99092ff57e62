//! The one place a policy is built from the routing config, by name.

use crate::affinity::{AffinitySink, DiscardAffinity};
use crate::cache_aware::CacheAwarePolicy;
use crate::config::{POLICY_NAMES, RoutingConfig};
use crate::consistent_hash::ConsistentHashPolicy;
use crate::error::RouterError;
use crate::least_load::LeastLoadPolicy;
use crate::policy::RoutingPolicy;
use crate::power_of_two::PowerOfTwoPolicy;
use crate::round_robin::RoundRobinPolicy;
use std::sync::Arc;
use switchyard_core::WallClock;

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
