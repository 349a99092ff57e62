//! Consistent hashing on the routing key, with bounded loads and hot-key spreading.

#[cfg(test)]
mod tests;

use crate::hash::stable_hash;
use crate::hotspot::{HotKeys, HotspotConfig};
use crate::load::{CandidateLoads, LeastLoaded, LoadBound};
use crate::membership::Membership;
use crate::policy::{Candidate, Decision, RouteRequest, RoutingPolicy, RoutingStats};
use crate::ring::ConsistentHashConfig;
use crate::routing_key::{RoutingKeyConfig, routing_key};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use switchyard_core::WallClock;
use switchyard_core::WorkerId;

/// The key's ring owner took it.
const HASH: &str = "hash";
/// A hot key went to its time slice's worker.
const HOT_SPREAD: &str = "hot_spread";
/// The owner was not a candidate (filtered by the gateway); the next worker clockwise took it.
const FILTERED_SKIP: &str = "filtered_skip";
/// The owner was above the load bound; a later worker clockwise took it (for a hot key: the
/// least loaded worker of its spread set within the bound).
const LOAD_SKIP: &str = "load_skip";
/// The request had no routing key at all: least loaded.
const NO_KEY: &str = "no_key";
/// No candidate is on the ring (membership not reported yet): least loaded.
const RING_FALLBACK: &str = "ring_fallback";
const BRANCHES: &[&str] = &[
    HASH,
    HOT_SPREAD,
    FILTERED_SKIP,
    LOAD_SKIP,
    NO_KEY,
    RING_FALLBACK,
];

pub struct ConsistentHashPolicy {
    config: ConsistentHashConfig,
    keys: RoutingKeyConfig,
    membership: Membership,
    hot: HotKeys,
    spread_width: usize,
    clock: WallClock,
    least_loaded: LeastLoaded,
    hot_spread_decisions: AtomicU64,
}

impl ConsistentHashPolicy {
    pub const NAME: &'static str = "consistent_hash";

    /// Configs must already be valid (`RoutingConfig::validate`).
    pub fn new(
        config: ConsistentHashConfig,
        hotspot: HotspotConfig,
        keys: RoutingKeyConfig,
        clock: WallClock,
    ) -> Self {
        Self {
            membership: Membership::new(config.vnodes_per_worker),
            spread_width: hotspot.spread_width as usize,
            hot: HotKeys::new(hotspot),
            config,
            keys,
            clock,
            least_loaded: LeastLoaded::default(),
            hot_spread_decisions: AtomicU64::new(0),
        }
    }

    fn least_loaded_decision(
        &self,
        candidates: &[Candidate],
        branch: &'static str,
    ) -> Option<Decision> {
        Some(Decision {
            worker: self.least_loaded.pick(candidates)?,
            branch,
            prefix_match: None,
            key_source: None,
        })
    }
}

/// A hot key's member of the ring: its slice's slot in the spread set, or, when that one is
/// above the load bound (or filtered), the least loaded member of the set within the bound,
/// counting from the slot so ties rotate with the slices. None if no member qualifies (the
/// caller walks the ring).
fn spread_member(
    set: &[u32],
    index: usize,
    loads: &CandidateLoads,
    bound: LoadBound,
) -> Option<(u32, &'static str)> {
    let slot = *set.get(index)?;
    let fits = |member: u32| loads.in_flight(member).filter(|&f| bound.accepts(f));
    if fits(slot).is_some() {
        return Some((slot, HOT_SPREAD));
    }
    let (_, member) = set
        .iter()
        .cycle()
        .skip(index)
        .take(set.len())
        .filter_map(|&member| Some((fits(member)?, member)))
        .min_by_key(|&(in_flight, _)| in_flight)?;
    let branch = if loads.in_flight(slot).is_some() {
        LOAD_SKIP
    } else {
        FILTERED_SKIP
    };
    Some((member, branch))
}

impl fmt::Debug for ConsistentHashPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConsistentHashPolicy")
            .field("config", &self.config)
            .field("membership", &self.membership)
            .finish_non_exhaustive()
    }
}

impl RoutingPolicy for ConsistentHashPolicy {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn select(&self, request: &RouteRequest<'_>, candidates: &[Candidate]) -> Option<Decision> {
        if candidates.is_empty() {
            return None;
        }
        let Some(key) = routing_key(&self.keys, &request.key_inputs()) else {
            return self.least_loaded_decision(candidates, NO_KEY);
        };
        let ring = self.membership.ring();
        if ring.is_empty() {
            return self.least_loaded_decision(candidates, RING_FALLBACK);
        }
        let hash = stable_hash(key.key.as_bytes());
        let mut start = ring.successor(hash);
        let loads = CandidateLoads::new(&ring, candidates);
        let bound = LoadBound::new(candidates, self.config.load_factor);
        let mut hot = false;
        if self.hot.enabled() {
            let now = self.clock.unix_now();
            if self.hot.observe(hash, now) {
                hot = true;
                let width = self.spread_width.min(ring.members().len());
                let index = self.hot.spread_index(hash, now, width);
                let set = ring.distinct_members_from(hash, width);
                if let Some((member, branch)) = spread_member(&set, index, &loads, bound) {
                    self.hot_spread_decisions.fetch_add(1, Ordering::Relaxed);
                    return Some(Decision {
                        worker: ring.member(member)?.id,
                        branch,
                        prefix_match: None,
                        key_source: Some(key.source),
                    });
                }
                start = ring.nth_distinct_from(hash, index);
            }
        }
        let Some(placed) = loads.place(&ring, start, bound) else {
            return self.least_loaded_decision(candidates, RING_FALLBACK);
        };
        let worker: WorkerId = ring.member(placed.member)?.id;
        if hot {
            self.hot_spread_decisions.fetch_add(1, Ordering::Relaxed);
        }
        let branch = if placed.skipped_load {
            LOAD_SKIP
        } else if placed.skipped_filtered {
            FILTERED_SKIP
        } else if hot {
            HOT_SPREAD
        } else {
            HASH
        };
        Some(Decision {
            worker,
            branch,
            prefix_match: None,
            key_source: Some(key.source),
        })
    }

    fn worker_added(&self, id: WorkerId, name: &str) {
        self.membership.add(id, name);
    }

    fn worker_removed(&self, id: WorkerId) {
        self.membership.remove(id);
    }

    fn stats(&self) -> RoutingStats {
        let ring = self.membership.ring();
        RoutingStats {
            ring_workers: ring.members().len() as u64,
            ring_vnodes: ring.vnode_count() as u64,
            membership_changes: self.membership.changes(),
            keys_moved_on_last_membership_change: self.membership.last_moved_share(),
            hot_keys_spread: if self.hot.enabled() {
                self.hot.hot_count(self.clock.unix_now())
            } else {
                0
            },
            hot_spread_decisions: self.hot_spread_decisions.load(Ordering::Relaxed),
            ..RoutingStats::default()
        }
    }

    fn branches(&self) -> &'static [&'static str] {
        BRANCHES
    }
}
