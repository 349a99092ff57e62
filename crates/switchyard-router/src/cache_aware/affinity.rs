//! Announcing this replica's affinity moves, and applying moves announced by others.

use super::CacheAwarePolicy;
use crate::affinity::{AffinityApplied, AffinityEvent, AffinityReason};
use crate::hash::stable_hash;
use crate::policy::RoutingStats;
use crate::ring::Ring;
use crate::routing_key::leading_chars;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use switchyard_core::WorkerId;

/// A decision that deviated from hash placement, already applied locally.
pub(super) enum Deviation {
    Migration {
        /// Prompt bytes of the migrated prefix.
        matched: usize,
        displaced: Vec<WorkerId>,
    },
    LoadMove,
}

#[derive(Debug, Default)]
pub(super) struct AffinityCounters {
    migrations: AtomicU64,
    load_moves: AtomicU64,
    applied: AtomicU64,
    ignored: AtomicU64,
}

impl AffinityCounters {
    pub(super) fn snapshot(&self) -> RoutingStats {
        RoutingStats {
            migrations: self.migrations.load(Ordering::Relaxed),
            load_moves: self.load_moves.load(Ordering::Relaxed),
            affinity_events_applied: self.applied.load(Ordering::Relaxed),
            affinity_events_ignored: self.ignored.load(Ordering::Relaxed),
            ..RoutingStats::default()
        }
    }
}

impl CacheAwarePolicy {
    /// Counts a deviation and publishes it to the sink (by worker name).
    pub(super) fn announce(
        &self,
        ring: &Ring,
        deviation: Deviation,
        prompt: &str,
        block: &str,
        worker: WorkerId,
    ) {
        let (reason, prefix, displaced) = match deviation {
            Deviation::Migration { matched, displaced } => {
                self.counters.migrations.fetch_add(1, Ordering::Relaxed);
                (AffinityReason::Migration, &prompt[..matched], displaced)
            }
            Deviation::LoadMove => {
                self.counters.load_moves.fetch_add(1, Ordering::Relaxed);
                (AffinityReason::LoadMove, block, Vec::new())
            }
        };
        let Some(name) = ring.name_of(worker) else {
            // Only possible if the gateway routes to workers it never reported as added.
            tracing::warn!(%worker, "affinity move to an unnamed worker not announced");
            return;
        };
        let event = AffinityEvent {
            // The prefix's own leading block: for a migrated prefix shorter than a block this
            // differs from the prompt's, and the event must describe itself.
            prefix_key: stable_hash(
                leading_chars(prefix, self.config.placement_block_bytes).as_bytes(),
            ),
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

    /// Applies an event by worker names. A migration makes `worker` hold the prefix and drops
    /// the displaced workers from it and below it; a load move records the placement override.
    /// Both are idempotent, so a replica's own events echoed back change nothing.
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
        let mut state = self.state.lock();
        match event.reason {
            AffinityReason::Migration => {
                if !event.prefix.is_empty() {
                    state.tree.lookup(&event.prefix).insert(worker);
                    state.tree.displace(&event.prefix, &displaced);
                }
            }
            AffinityReason::LoadMove => state.overrides.set(event.prefix_key, worker),
        }
        drop(state);
        self.counters.applied.fetch_add(1, Ordering::Relaxed);
        AffinityApplied::Applied
    }
}
