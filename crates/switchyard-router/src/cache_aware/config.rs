//! Tunables of the cache-aware policy.

use crate::error::{RouterError, invalid};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CacheAwareConfig {
    /// A candidate's cached prefix must cover more than this share of the prompt (0.0..=1.0).
    pub match_threshold: f32,
    /// Load guard: in-flight max − min must exceed this…
    pub balance_abs_threshold: u64,
    /// …and max must exceed min × this (≥ 1.0) before cache affinity is ignored.
    pub balance_rel_threshold: f64,
    /// Bound on the prompt text bytes stored in the prefix tree (> 0); node bookkeeping
    /// (roughly 100 bytes per node) comes on top.
    pub max_tree_bytes: u64,
    /// Prompts shorter than this skip the tree entirely: routed least-loaded, never cached.
    /// Empty prompts always do.
    pub min_prompt_bytes: u64,
    /// A prompt no worker has cached is placed by hashing this many leading bytes onto the
    /// ring, so every gateway replica picks the same worker without talking.
    pub placement_block_bytes: u64,
    /// Bound on remembered load-driven placement moves (oldest forgotten first).
    pub max_placement_overrides: u64,
}

impl Default for CacheAwareConfig {
    fn default() -> Self {
        Self {
            match_threshold: 0.5,
            balance_abs_threshold: 32,
            balance_rel_threshold: 1.5,
            max_tree_bytes: 64 * 1024 * 1024,
            min_prompt_bytes: 1,
            placement_block_bytes: 256,
            max_placement_overrides: 65_536,
        }
    }
}

impl CacheAwareConfig {
    pub fn validate(&self) -> Result<(), RouterError> {
        if !(0.0..=1.0).contains(&self.match_threshold) {
            return Err(invalid(
                "cache_aware.match_threshold",
                "must be within 0.0..=1.0",
                self.match_threshold,
            ));
        }
        if !(self.balance_rel_threshold.is_finite() && self.balance_rel_threshold >= 1.0) {
            return Err(invalid(
                "cache_aware.balance_rel_threshold",
                "must be a finite number >= 1.0",
                self.balance_rel_threshold,
            ));
        }
        if self.max_tree_bytes == 0 {
            return Err(invalid(
                "cache_aware.max_tree_bytes",
                "must be > 0",
                self.max_tree_bytes,
            ));
        }
        if self.placement_block_bytes == 0 {
            return Err(invalid(
                "cache_aware.placement_block_bytes",
                "must be > 0",
                self.placement_block_bytes,
            ));
        }
        if self.max_placement_overrides == 0 {
            return Err(invalid(
                "cache_aware.max_placement_overrides",
                "must be > 0",
                self.max_placement_overrides,
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(error: RouterError) -> &'static str {
        match error {
            RouterError::InvalidConfig { field, .. } => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(CacheAwareConfig::default().validate(), Ok(()));
    }

    #[test]
    fn each_invalid_value_names_its_field() {
        let cases = [
            (
                CacheAwareConfig {
                    match_threshold: 1.5,
                    ..Default::default()
                },
                "cache_aware.match_threshold",
            ),
            (
                CacheAwareConfig {
                    match_threshold: f32::NAN,
                    ..Default::default()
                },
                "cache_aware.match_threshold",
            ),
            (
                CacheAwareConfig {
                    balance_rel_threshold: 0.9,
                    ..Default::default()
                },
                "cache_aware.balance_rel_threshold",
            ),
            (
                CacheAwareConfig {
                    balance_rel_threshold: f64::INFINITY,
                    ..Default::default()
                },
                "cache_aware.balance_rel_threshold",
            ),
            (
                CacheAwareConfig {
                    max_tree_bytes: 0,
                    ..Default::default()
                },
                "cache_aware.max_tree_bytes",
            ),
            (
                CacheAwareConfig {
                    placement_block_bytes: 0,
                    ..Default::default()
                },
                "cache_aware.placement_block_bytes",
            ),
            (
                CacheAwareConfig {
                    max_placement_overrides: 0,
                    ..Default::default()
                },
                "cache_aware.max_placement_overrides",
            ),
        ];
        for (config, field) in cases {
            let error = config.validate().unwrap_err();
            assert!(error.to_string().contains(field), "{error}");
            assert_eq!(field_of(error), field);
        }
    }

    #[test]
    fn deserializes_with_defaults_and_rejects_unknown_fields() {
        let config: CacheAwareConfig =
            serde_json::from_str(r#"{"match_threshold": 0.25}"#).unwrap();
        assert_eq!(
            config,
            CacheAwareConfig {
                match_threshold: 0.25,
                ..Default::default()
            }
        );
        let error = serde_json::from_str::<CacheAwareConfig>(r#"{"match_treshold": 0.25}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("match_treshold"), "{error}");
    }
}
