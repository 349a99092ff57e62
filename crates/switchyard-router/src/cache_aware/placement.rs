//! Placing a prompt no worker has cached: hash its leading block onto the ring (bounded
//! load), unless a replica already moved that block elsewhere (a placement override).

use crate::hash::PrehashedKey;
use crate::load::{CandidateLoads, LoadBound};
use crate::ring::Ring;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use switchyard_core::WorkerId;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PlacementKind {
    /// Followed a placement override.
    Override,
    /// The block's ring owner.
    Hash,
    /// The owner was filtered; the next worker clockwise (every replica walks the same way).
    HashFallback,
    /// The owner (or a later worker) was over the load bound: a deviation to broadcast.
    LoadMove,
}

/// Leading-block hash → worker, for blocks placed off their ring owner. Bounded; the oldest
/// entry goes first.
#[derive(Debug)]
pub(super) struct PlacementOverrides {
    capacity: usize,
    by_block: HashMap<u64, WorkerId, BuildHasherDefault<PrehashedKey>>,
    /// Exactly the keys of `by_block`, oldest first.
    order: VecDeque<u64>,
}

impl PlacementOverrides {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            by_block: HashMap::default(),
            order: VecDeque::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.by_block.len()
    }

    pub(super) fn get(&self, block: u64) -> Option<WorkerId> {
        self.by_block.get(&block).copied()
    }

    pub(super) fn set(&mut self, block: u64, worker: WorkerId) {
        if self.by_block.insert(block, worker).is_some() {
            return;
        }
        self.order.push_back(block);
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.by_block.remove(&oldest);
            }
        }
    }

    pub(super) fn forget_worker(&mut self, worker: WorkerId) {
        self.by_block.retain(|_, owner| *owner != worker);
        let by_block = &self.by_block;
        self.order.retain(|block| by_block.contains_key(block));
    }
}

/// Where a new prompt with leading-block hash `block` goes, or None if no candidate is on
/// the ring (the caller falls back to least loaded).
pub(super) fn place(
    ring: &Ring,
    overrides: &PlacementOverrides,
    loads: &CandidateLoads,
    bound: LoadBound,
    block: u64,
) -> Option<(WorkerId, PlacementKind)> {
    if let Some(worker) = overrides.get(block) {
        let fits = ring
            .member_index(worker)
            .and_then(|member| loads.in_flight(member))
            .is_some_and(|in_flight| bound.accepts(in_flight));
        if fits {
            return Some((worker, PlacementKind::Override));
        }
    }
    let placed = ring.place(ring.successor(block), loads, bound)?;
    let kind = if placed.skipped_load {
        PlacementKind::LoadMove
    } else if placed.skipped_filtered {
        PlacementKind::HashFallback
    } else {
        PlacementKind::Hash
    };
    Some((ring.member(placed.member)?.id, kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_are_bounded_and_forget_departed_workers() {
        let mut overrides = PlacementOverrides::new(2);
        overrides.set(1, WorkerId(10));
        overrides.set(2, WorkerId(20));
        overrides.set(1, WorkerId(11)); // an update, not a new entry
        assert_eq!(overrides.get(1), Some(WorkerId(11)));
        overrides.set(3, WorkerId(20));
        assert_eq!(overrides.len(), 2);
        assert_eq!(overrides.get(1), None, "the oldest entry went first");
        overrides.forget_worker(WorkerId(20));
        assert_eq!(overrides.len(), 0);
        overrides.set(4, WorkerId(1));
        overrides.set(5, WorkerId(1));
        assert_eq!(
            (overrides.get(4), overrides.get(5)),
            (Some(WorkerId(1)), Some(WorkerId(1)))
        );
    }
}
