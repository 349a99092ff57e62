//! What the per-request lock covers.

use super::escape::LearnedBatches;
use super::fleet_share::FleetShare;
use super::group_shares::GroupShares;
use super::openings::OpeningsSeen;
use super::placement::PlacementOverrides;
use super::prompt_group::GroupPlan;
use super::recent::RecentLoad;
use super::tree::PrefixTree;
use std::time::Duration;
use switchyard_core::WorkerId;

/// Everything the per-request lock covers: one acquisition per request for lookup, decision
/// and insert, so affinity rewrites happen "at once" relative to other requests.
pub(super) struct AffinityState {
    pub(super) tree: PrefixTree,
    pub(super) overrides: PlacementOverrides,
    pub(super) recent: RecentLoad,
    /// Prompt bytes each worker was sent beyond what this replica saw it cache: what its
    /// engine wrote to (and evicted from) its KV cache lately.
    pub(super) written: RecentLoad,
    /// Conversations opened on each worker lately by every replica whose placements reach
    /// this one (fresh first-turn records applied): the fleet's view where this replica
    /// sends only a share of each worker's turns.
    pub(super) opened: RecentLoad,
    pub(super) groups: GroupShares,
    pub(super) plan: GroupPlan,
    pub(super) batches: LearnedBatches,
    pub(super) fleet: FleetShare,
    pub(super) openings: OpeningsSeen,
}

impl AffinityState {
    /// `half_life` decays the recent placements, writes and openings; `now` starts the
    /// estimates that must leave out what happened before this replica started.
    pub(super) fn new(
        max_tree_bytes: usize,
        max_overrides: usize,
        half_life: Duration,
        now: Duration,
    ) -> Self {
        Self {
            tree: PrefixTree::new(max_tree_bytes),
            overrides: PlacementOverrides::new(max_overrides),
            recent: RecentLoad::new(half_life),
            written: RecentLoad::new(half_life),
            opened: RecentLoad::new(half_life),
            groups: GroupShares::with_defaults(),
            plan: GroupPlan::default(),
            batches: LearnedBatches::default(),
            fleet: FleetShare::starting_at(now),
            openings: OpeningsSeen::starting_at(now),
        }
    }

    /// A worker left the ring: nothing here may point at it or count it any more.
    pub(super) fn forget_worker(&mut self, id: WorkerId) {
        self.tree.remove_worker(id);
        self.overrides.forget_worker(id);
        self.recent.forget(id);
        self.written.forget(id);
        self.opened.forget(id);
        self.batches.forget(id);
    }
}
