//! The routing section of the gateway config: which policy, and every policy's tunables.

use crate::cache_aware::{CacheAwareConfig, CacheAwarePolicy};
use crate::consistent_hash::ConsistentHashPolicy;
use crate::error::RouterError;
use crate::hotspot::HotspotConfig;
use crate::least_load::LeastLoadPolicy;
use crate::power_of_two::PowerOfTwoPolicy;
use crate::ring::ConsistentHashConfig;
use crate::round_robin::RoundRobinPolicy;
use crate::routing_key::RoutingKeyConfig;
use serde::{Deserialize, Serialize};

/// Every policy name `policy` accepts (and `build_policy` builds).
pub const POLICY_NAMES: &[&str] = &[
    RoundRobinPolicy::NAME,
    CacheAwarePolicy::NAME,
    ConsistentHashPolicy::NAME,
    PowerOfTwoPolicy::NAME,
    LeastLoadPolicy::NAME,
];

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingConfig {
    /// One of [`POLICY_NAMES`].
    pub policy: String,
    pub cache_aware: CacheAwareConfig,
    /// The ring, used by `consistent_hash` and by `cache_aware`'s hash placement.
    pub consistent_hash: ConsistentHashConfig,
    /// Hot-key spreading of `consistent_hash`.
    pub hotspot: HotspotConfig,
    /// The routing key of `consistent_hash`, of `cache_aware`'s placement, and of warmup.
    pub routing_key: RoutingKeyConfig,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            policy: CacheAwarePolicy::NAME.into(),
            cache_aware: CacheAwareConfig::default(),
            consistent_hash: ConsistentHashConfig::default(),
            hotspot: HotspotConfig::default(),
            routing_key: RoutingKeyConfig::default(),
        }
    }
}

impl RoutingConfig {
    /// Validates every section, not only the chosen policy's, so a later switch of policy
    /// cannot trip over a section nobody checked.
    pub fn validate(&self) -> Result<(), RouterError> {
        if !POLICY_NAMES.contains(&self.policy.as_str()) {
            return Err(RouterError::UnknownPolicy {
                name: self.policy.clone(),
                valid: POLICY_NAMES,
            });
        }
        self.cache_aware.validate()?;
        self.consistent_hash.validate()?;
        self.hotspot.validate()?;
        self.routing_key.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_parse_from_partial_input() {
        assert_eq!(RoutingConfig::default().validate(), Ok(()));
        let config: RoutingConfig = serde_json::from_str(
            r#"{"policy": "consistent_hash", "consistent_hash": {"load_factor": 1.5},
                "hotspot": {"slice_ms": 10000}}"#,
        )
        .unwrap();
        assert_eq!(config.policy, "consistent_hash");
        assert_eq!(config.consistent_hash.load_factor, 1.5);
        assert_eq!(config.consistent_hash.vnodes_per_worker, 256);
        assert_eq!(config.hotspot.slice_ms, 10_000);
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn unknown_fields_are_rejected_in_every_section() {
        for text in [
            r#"{"polcy": "x"}"#,
            r#"{"consistent_hash": {"vnodes": 3}}"#,
            r#"{"hotspot": {"slice": 3}}"#,
            r#"{"routing_key": {"header": "x"}}"#,
            r#"{"cache_aware": {"block": 3}}"#,
        ] {
            assert!(
                serde_json::from_str::<RoutingConfig>(text).is_err(),
                "{text}"
            );
        }
    }

    #[test]
    fn validation_names_the_offending_field_in_any_section() {
        let cases = [
            (
                RoutingConfig {
                    consistent_hash: ConsistentHashConfig {
                        load_factor: 0.9,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "consistent_hash.load_factor",
            ),
            (
                RoutingConfig {
                    consistent_hash: ConsistentHashConfig {
                        vnodes_per_worker: 0,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "consistent_hash.vnodes_per_worker",
            ),
            (
                RoutingConfig {
                    hotspot: HotspotConfig {
                        top_k: 0,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "hotspot.top_k",
            ),
            (
                RoutingConfig {
                    cache_aware: CacheAwareConfig {
                        max_tree_bytes: 0,
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "cache_aware.max_tree_bytes",
            ),
            (
                RoutingConfig {
                    routing_key: RoutingKeyConfig {
                        order: Vec::new(),
                        ..Default::default()
                    },
                    ..Default::default()
                },
                "routing_key.order",
            ),
        ];
        for (config, field) in cases {
            let error = config.validate().unwrap_err();
            assert!(
                matches!(&error, RouterError::InvalidConfig { field: named, .. } if *named == field),
                "{error}"
            );
            assert!(error.to_string().contains(field), "{error}");
        }
        let unknown = RoutingConfig {
            policy: "random".into(),
            ..Default::default()
        };
        assert!(matches!(
            unknown.validate(),
            Err(RouterError::UnknownPolicy { .. })
        ));
    }
}
