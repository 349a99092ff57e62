//! Routing policies for Switchyard: given a request and the routable workers, pick one.
//!
//! `round_robin` spreads evenly; `cache_aware` follows cached prompt prefixes (a bounded
//! radix tree) with a least-loaded fallback and an imbalance guard.

mod cache_aware;
mod error;
mod load;
mod policy;
mod round_robin;

pub use cache_aware::{CacheAwareConfig, CacheAwarePolicy};
pub use error::RouterError;
pub use policy::{Candidate, Decision, PrefixMatch, RouteRequest, RoutingPolicy};
pub use round_robin::RoundRobinPolicy;

use std::sync::Arc;

/// Every name [`build_policy`] accepts.
pub const POLICY_NAMES: &[&str] = &[RoundRobinPolicy::NAME, CacheAwarePolicy::NAME];

/// Builds the policy called `name`; `cache_aware` is validated only when that policy is built.
pub fn build_policy(
    name: &str,
    cache_aware: &CacheAwareConfig,
) -> Result<Arc<dyn RoutingPolicy>, RouterError> {
    match name {
        RoundRobinPolicy::NAME => Ok(Arc::new(RoundRobinPolicy::new())),
        CacheAwarePolicy::NAME => Ok(Arc::new(CacheAwarePolicy::new(cache_aware.clone())?)),
        unknown => Err(RouterError::UnknownPolicy {
            name: unknown.to_owned(),
            valid: POLICY_NAMES,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_every_listed_policy_under_its_name() {
        for &name in POLICY_NAMES {
            let policy = build_policy(name, &CacheAwareConfig::default()).unwrap();
            assert_eq!(policy.name(), name);
            assert!(!policy.branches().is_empty());
        }
    }

    #[test]
    fn unknown_policy_error_lists_valid_names() {
        let error = build_policy("nope", &CacheAwareConfig::default())
            .err()
            .unwrap();
        assert!(matches!(&error, RouterError::UnknownPolicy { name, .. } if name == "nope"));
        let message = error.to_string();
        assert!(message.contains("nope"), "{message}");
        assert!(message.contains("round_robin"), "{message}");
        assert!(message.contains("cache_aware"), "{message}");
    }

    #[test]
    fn invalid_cache_aware_config_is_rejected_at_build_time() {
        let config = CacheAwareConfig {
            max_tree_bytes: 0,
            ..Default::default()
        };
        let error = build_policy("cache_aware", &config).err().unwrap();
        assert!(error.to_string().contains("max_tree_bytes"), "{error}");
        // Round robin does not use the cache-aware settings.
        assert!(build_policy("round_robin", &config).is_ok());
    }
}
