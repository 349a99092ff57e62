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
    /// Deprecated and ignored (still accepted so existing config files load; a warning is
    /// logged when it differs from `routing_key.prompt_prefix_bytes`): requests without an
    /// affinity are placed by hashing the routing key (`routing.routing_key`), the function
    /// warmup shares, so every gateway replica picks the same worker without talking.
    pub placement_block_bytes: u64,
    /// Placing a new key that is not a chat conversation (a prompt-prefix block, a session's
    /// completion prompt) also skips a worker whose recent share of this replica's requests
    /// exceeds this × the mean (≥ 1.0),
    /// besides the ring's in-flight bound (`consistent_hash.load_factor`). In-flight counts
    /// at low concurrency are too coarse to balance by, and moving a conversation before it
    /// has cached anything costs nothing, so this bound is tight.
    pub placement_load_factor: f64,
    /// Half-life of the decayed request counts behind that share (> 0).
    pub placement_load_half_life_ms: u64,
    /// Bound on remembered placement moves (load moves and migrations, by routing key; oldest
    /// forgotten first).
    pub max_placement_overrides: u64,
    /// A chat request with neither session nor user is named by its opening (system prompt
    /// and first user message): placed on the ring as its own conversation, later turns
    /// following it. Off: such requests follow any shared prefix and are placed by the
    /// prompt-prefix key.
    pub anonymous_conversations: bool,
    /// A chat conversation's first turn skips its ring owner only while the owner has more
    /// than this × the mean in-flight requests (≥ 1.0); the recent-share bound does not apply
    /// to it. Loose on purpose: replicas that do not share affinity events each follow the
    /// ring for turns they never saw placed, so a move made on one replica's private load view
    /// splits the conversation; the ring alone already spreads many conversations evenly.
    /// Replicas that share their placements (one Raft group) follow such a move, but read
    /// the same local counts: scaled to the fleet (× the replicas placing) the bound moved
    /// first turns out of their prompt's group on a sample's noise, for a lower hit rate.
    pub opening_load_factor: f64,
    /// A first turn never skips a worker that has fewer than this many of this replica's
    /// requests in flight, whatever `opening_load_factor` says. A replica fed 1/N of the
    /// traffic sees 1/N of every worker's load, where one or two requests over the mean are
    /// noise, not a hot worker; and a first turn moved on that noise splits its conversation
    /// from the replicas that never hear of the move (they send its later turns to the
    /// conversation's own worker).
    pub opening_min_in_flight: u64,
    /// A later chat turn leaves its conversation's worker while that worker's engine reports
    /// at least this many requests waiting for a batch slot (its scraped load gauges, the
    /// same on every replica), for the first worker clockwise from the conversation that
    /// reports no queue and less load. 0 never leaves; workers that report no gauges never do.
    pub later_turn_escape_queued: u64,
    /// A later chat turn also leaves its conversation's worker while that worker carries at
    /// least this many requests (this replica's in-flight count, or the engine's reported
    /// running + queued when higher), for the first worker clockwise from the conversation
    /// carrying at most half as many. Set it to the engines' batch size (vLLM
    /// `max_num_seqs`): at that depth the turn would wait for a batch slot, which costs more
    /// than re-reading its conversation. 0 (the default): the learned batch size below.
    pub later_turn_escape_in_flight: u64,
    /// With `later_turn_escape_in_flight` 0, the depth is each worker's batch size as its
    /// engine showed it (the most requests it reported running while others waited for a
    /// slot), once it has shown it: only workers whose engine reports gauges, and only after
    /// their first queue. false: no escape on load alone unless a depth is set.
    pub later_turn_escape_learned: bool,
    /// A chat conversation is placed within a group of workers planned for its system prompt,
    /// so each popular system prompt is cached on as few workers as its traffic needs rather
    /// than on all of them: every replica ranks the workers for the prompt alike (rendezvous
    /// on the prompt), the prompts, least busy first by their share of the recent turns (the
    /// fleet's turns of every conversation this replica saw, read from the histories), fill
    /// their ranked workers up to an even share each, and a conversation draws
    /// one of its prompt's workers by weighted rendezvous, the same on every replica and at
    /// every turn. Off: conversations spread over the whole ring by their opening.
    pub prompt_groups: bool,
    /// Each worker's capacity in that plan, × an even share of the grouped traffic (≥ 1.0):
    /// at 1.0 the plan balances the workers exactly; more lets a popular prompt keep fewer
    /// workers at some imbalance. A first turn still leaves its drawn worker while it has
    /// more than `opening_load_factor` × the mean in flight (a load move).
    pub prompt_group_load_factor: f64,
    /// Only a system prompt at least this long (bytes of flattened text) groups its
    /// conversations; shorter ones are cheap to re-prefill and spread over the ring.
    pub prompt_group_min_bytes: u64,
    /// A conversation's first turn takes the group worker it draws second instead of the
    /// first when that one was sent fewer uncached prompt bytes lately (what its engine
    /// writes to, and so evicts from, its KV cache), evening out the evictions, but only where
    /// the later turns follow the first wherever it went: on a replica that meets (nearly)
    /// every conversation at its opening (metric `switchyard_routing_openings_met_ratio`), or
    /// on replicas that apply each other's placements (one Raft group,
    /// `switchyard_routing_placement_replicas` ≥ 1.5); one of several independent replicas
    /// fed at random keeps to the draw everyone shares.
    pub prompt_group_balance: bool,
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
            placement_load_factor: 1.0,
            placement_load_half_life_ms: 10_000,
            max_placement_overrides: 65_536,
            anonymous_conversations: true,
            opening_load_factor: 2.0,
            opening_min_in_flight: 4,
            later_turn_escape_queued: 1,
            later_turn_escape_in_flight: 0,
            later_turn_escape_learned: true,
            prompt_groups: true,
            prompt_group_load_factor: 1.0,
            prompt_group_min_bytes: 1024,
            prompt_group_balance: true,
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
        if !(self.placement_load_factor.is_finite() && self.placement_load_factor >= 1.0) {
            return Err(invalid(
                "cache_aware.placement_load_factor",
                "must be a finite number >= 1.0",
                self.placement_load_factor,
            ));
        }
        if !(self.opening_load_factor.is_finite() && self.opening_load_factor >= 1.0) {
            return Err(invalid(
                "cache_aware.opening_load_factor",
                "must be a finite number >= 1.0",
                self.opening_load_factor,
            ));
        }
        if !(self.prompt_group_load_factor.is_finite() && self.prompt_group_load_factor >= 1.0) {
            return Err(invalid(
                "cache_aware.prompt_group_load_factor",
                "must be a finite number >= 1.0",
                self.prompt_group_load_factor,
            ));
        }
        if self.placement_load_half_life_ms == 0 {
            return Err(invalid(
                "cache_aware.placement_load_half_life_ms",
                "must be > 0",
                self.placement_load_half_life_ms,
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
                    placement_load_factor: 0.5,
                    ..Default::default()
                },
                "cache_aware.placement_load_factor",
            ),
            (
                CacheAwareConfig {
                    placement_load_factor: f64::NAN,
                    ..Default::default()
                },
                "cache_aware.placement_load_factor",
            ),
            (
                CacheAwareConfig {
                    opening_load_factor: 0.99,
                    ..Default::default()
                },
                "cache_aware.opening_load_factor",
            ),
            (
                CacheAwareConfig {
                    prompt_group_load_factor: 0.5,
                    ..Default::default()
                },
                "cache_aware.prompt_group_load_factor",
            ),
            (
                CacheAwareConfig {
                    placement_load_half_life_ms: 0,
                    ..Default::default()
                },
                "cache_aware.placement_load_half_life_ms",
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
