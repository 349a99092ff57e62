//! Announcing this replica's affinity moves, and applying moves announced by others.

use super::CacheAwarePolicy;
use super::deviation::Deviation;
use super::key::KeyOf;
use crate::affinity::{AffinityApplied, AffinityEvent, AffinityReason};
use crate::hash::stable_hash;
use crate::ring::Ring;
use crate::routing_key::{RoutingKeySource, leading_chars};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use switchyard_core::WorkerId;

impl CacheAwarePolicy {
    /// Counts a deviation and publishes it to the sink (by worker name). The event is keyed by
    /// the request's routing key, the same key placement and overrides use.
    pub(super) fn announce(
        &self,
        ring: &Ring,
        deviation: Deviation,
        prompt: &str,
        key: Option<KeyOf<'_>>,
        worker: WorkerId,
    ) {
        let (reason, prefix, displaced) = match deviation {
            Deviation::Migration { matched, displaced } => {
                self.counters.migrations.fetch_add(1, Ordering::Relaxed);
                (AffinityReason::Migration, &prompt[..matched], displaced)
            }
            Deviation::LoadMove | Deviation::GroupPlacement => {
                if matches!(deviation, Deviation::LoadMove) {
                    self.counters.load_moves.fetch_add(1, Ordering::Relaxed);
                }
                // A prompt-prefix key is prompt text, which events carry anyway; a session id
                // or user name is an identity and stays out of the broadcast (the hash does).
                let text = match key {
                    Some(key) if key.source == RoutingKeySource::PromptPrefix => key.text,
                    _ => "",
                };
                (AffinityReason::LoadMove, text, Vec::new())
            }
        };
        // No key only when routing_key.order leaves out prompt_prefix and the request has no
        // identity: such requests are never placed by key, so this entry is never looked up.
        let prefix_key = match key {
            Some(key) => key.hash,
            None => stable_hash(leading_chars(prefix, self.keys.prompt_prefix_bytes).as_bytes()),
        };
        let Some(name) = ring.name_of(worker) else {
            // Only possible if the gateway routes to workers it never reported as added.
            tracing::warn!(%worker, "affinity move to an unnamed worker not announced");
            return;
        };
        let event = AffinityEvent {
            prefix_key,
            prefix: Arc::from(prefix),
            worker: name.to_string(),
            displaced: displaced
                .iter()
                .filter_map(|&id| ring.name_of(id))
                .map(|name| name.to_string())
                .collect(),
            reason,
            at_unix_ms: self.clock.unix_millis(),
        };
        tracing::debug!(
            reason = reason.label(),
            worker = %event.worker,
            displaced = ?event.displaced,
            prefix_bytes = event.prefix.len(),
            "affinity moved"
        );
        self.sink.publish(event);
    }

    /// Applies an event by worker names. Both kinds point the routing key (`prefix_key`) at
    /// `worker`, so this replica places the session or block where the emitter did; a migration
    /// also makes `worker` hold the prefix and drops the displaced workers from it and below
    /// it, so the conversation's next turn follows as a prefix hit. Idempotent, so a replica's
    /// own events echoed back change nothing.
    pub(super) fn apply_event(&self, event: &AffinityEvent) -> AffinityApplied {
        let ring = self.membership.ring();
        let Some(worker) = ring.id_of(&event.worker) else {
            self.counters.ignored.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(worker = %event.worker, "affinity event for an unknown worker ignored");
            return AffinityApplied::UnknownWorker;
        };
        // Displaced workers this replica does not know hold nothing here anyway.
        let displaced: Vec<WorkerId> = event
            .displaced
            .iter()
            .filter_map(|name| ring.id_of(name))
            .filter(|&id| id != worker)
            .collect();
        let now = self.clock.unix_now();
        let mut state = self.state.lock();
        let announced_at = Duration::from_millis(event.at_unix_ms);
        // A first turn placed by some replica (its own echoed back included); counted only
        // for balancing, the one thing that reads it.
        if self.config.prompt_group_balance
            && event.reason == AffinityReason::LoadMove
            && state.fleet.is_current(now, announced_at)
        {
            state.opened.record(worker, now);
        }
        state.fleet.applied(now, announced_at);
        if event.reason == AffinityReason::Migration && !event.prefix.is_empty() {
            state.tree.lookup(&event.prefix).insert(worker);
            state.tree.displace(&event.prefix, &displaced);
        }
        state.overrides.apply(event.prefix_key, worker);
        drop(state);
        self.counters.applied.fetch_add(1, Ordering::Relaxed);
        AffinityApplied::Applied
    }
}
