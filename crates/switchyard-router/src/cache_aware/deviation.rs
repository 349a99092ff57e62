//! A decision that deviated from hash placement, and the counts of the deviations announced
//! and of the events applied, apart from the policy that announces and applies them.

use crate::policy::RoutingStats;
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
    /// A first turn placed by its system prompt's group plan, which each replica builds from
    /// its own share estimates: announced (as a load move) so replicas that share events
    /// send the later turns exactly there, whatever their own plan says.
    GroupPlacement,
}

#[derive(Debug, Default)]
pub(super) struct AffinityCounters {
    pub(super) migrations: AtomicU64,
    pub(super) load_moves: AtomicU64,
    pub(super) applied: AtomicU64,
    pub(super) ignored: AtomicU64,
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
