//! Placing a request no worker holds an affinity for: hash its routing key onto the ring
//! (bounded load), unless a replica already moved that key elsewhere (a placement override).

use super::prompt_group::{self, GroupPlacement};
use super::recent::ShareBound;
use super::slot_draw::Slot;
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
    /// The key's ring owner.
    Hash,
    /// The owner was filtered; the next worker clockwise (every replica walks the same way).
    HashFallback,
    /// The owner (or a later worker) was over the load bound: a deviation to broadcast.
    LoadMove,
    /// The conversation's worker within its system prompt's group.
    Group,
    /// The group's worker for the conversation was over the bound (a first turn): another
    /// worker of the prompt's ranking took it, a deviation to broadcast.
    GroupSpill,
    /// A first turn given the group worker it drew second, which wrote less to its cache.
    GroupBalanced,
    /// A later turn of a conversation opened before the last worker join or leave: the
    /// worker the plan of its opening drew, which stayed.
    GroupBeforeChange,
}

/// Routing-key hash → worker, for keys placed off their ring owner (load moves) or moved by a
/// migration. Bounded; the oldest entry goes first.
#[derive(Debug)]
pub(super) struct PlacementOverrides {
    capacity: usize,
    by_key: HashMap<u64, Override, BuildHasherDefault<PrehashedKey>>,
    /// Exactly the keys of `by_key`, oldest first.
    order: VecDeque<u64>,
}

impl PlacementOverrides {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            by_key: HashMap::default(),
            order: VecDeque::new(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.by_key.len()
    }

    pub(super) fn get(&self, key: u64) -> Option<WorkerId> {
        self.by_key.get(&key).map(|entry| entry.worker)
    }

    /// The key's override if it came from an affinity event, which every replica applies
    /// where replicas share them; None for one this replica set and did not see come back.
    pub(super) fn get_shared(&self, key: u64) -> Option<WorkerId> {
        self.by_key
            .get(&key)
            .filter(|entry| entry.shared)
            .map(|entry| entry.worker)
    }

    /// Whether the key's override is one this replica set and did not see come back.
    pub(super) fn is_private(&self, key: u64) -> bool {
        self.by_key.get(&key).is_some_and(|entry| !entry.shared)
    }

    /// A move this replica made.
    pub(super) fn set(&mut self, key: u64, worker: WorkerId) {
        self.insert(key, Override::private(worker));
    }

    /// A move some replica announced (this one's own included), applied from its event.
    pub(super) fn apply(&mut self, key: u64, worker: WorkerId) {
        self.insert(
            key,
            Override {
                worker,
                shared: true,
            },
        );
    }

    fn insert(&mut self, key: u64, entry: Override) {
        if self.by_key.insert(key, entry).is_some() {
            return;
        }
        self.order.push_back(key);
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.by_key.remove(&oldest);
            }
        }
    }

    pub(super) fn forget_worker(&mut self, worker: WorkerId) {
        self.by_key.retain(|_, entry| entry.worker != worker);
        let by_key = &self.by_key;
        self.order.retain(|key| by_key.contains_key(key));
    }
}

#[derive(Clone, Copy, Debug)]
struct Override {
    worker: WorkerId,
    /// Applied from an affinity event rather than set by this replica alone.
    shared: bool,
}

impl Override {
    fn private(worker: WorkerId) -> Self {
        Self {
            worker,
            shared: false,
        }
    }
}

/// Where a request with routing-key hash `key` goes, or None if no candidate is on the ring
/// (the caller falls back to least loaded): `moved_to` (the key's placement override, if the
/// caller follows one) if it fits the bounds, else the ring. A worker takes it while within
/// both the in-flight bound and the recent-share bound; if no candidate is within both, the
/// in-flight bound alone decides (it always leaves one).
pub(super) fn place(
    ring: &Ring,
    moved_to: Option<WorkerId>,
    loads: &CandidateLoads,
    bound: LoadBound,
    share: &ShareBound,
    key: u64,
) -> Option<(WorkerId, PlacementKind)> {
    let within_both =
        |member: u32, in_flight: u64| bound.accepts(in_flight) && share.accepts(member);
    if let Some(worker) = moved_to {
        let fits = ring.member_index(worker).is_some_and(|member| {
            loads
                .in_flight(member)
                .is_some_and(|in_flight| within_both(member, in_flight))
        });
        if fits {
            return Some((worker, PlacementKind::Override));
        }
    }
    let start = ring.successor(key);
    let placed = loads
        .place_where(ring, start, within_both)
        .or_else(|| loads.place(ring, start, bound))?;
    let kind = if placed.skipped_load {
        PlacementKind::LoadMove
    } else if placed.skipped_filtered {
        PlacementKind::HashFallback
    } else {
        PlacementKind::Hash
    };
    Some((ring.member(placed.member)?.id, kind))
}

/// Where a later turn of a known conversation goes: its override (`moved_to`) if that worker
/// is a candidate, else its ring owner, walking past filtered workers only. No load bound: moving a
/// conversation that has a cache costs more than a busy worker, and a replica's load view is
/// its own, so a bound here would send the turns one replica sees away from the worker the
/// others keep using.
pub(super) fn place_sticky(
    ring: &Ring,
    moved_to: Option<WorkerId>,
    loads: &CandidateLoads,
    key: u64,
) -> Option<(WorkerId, PlacementKind)> {
    if let Some(worker) = moved_to {
        let candidate = ring
            .member_index(worker)
            .is_some_and(|member| loads.in_flight(member).is_some());
        if candidate {
            return Some((worker, PlacementKind::Override));
        }
    }
    let placed = loads.place_where(ring, ring.successor(key), |_, _| true)?;
    let kind = if placed.skipped_filtered {
        PlacementKind::HashFallback
    } else {
        PlacementKind::Hash
    };
    Some((ring.member(placed.member)?.id, kind))
}

/// A chat turn placed by its system prompt's group (`prompt_group`): the conversation's
/// override (`moved_to`) if some replica moved it and that worker is a candidate (and, for a
/// first turn, within `accepts`), else the group's worker for it. A later turn passes
/// `accepts` that takes everyone: where the conversation lives matters more than load.
pub(super) fn place_in_group(
    ring: &Ring,
    moved_to: Option<WorkerId>,
    loads: &CandidateLoads,
    group: &Grouping,
    key: u64,
    accepts: impl Fn(u32, u64) -> bool,
    written: Option<&[f64]>,
) -> Option<(WorkerId, PlacementKind)> {
    if let Some(worker) = moved_to {
        let fits = ring.member_index(worker).is_some_and(|member| {
            loads
                .in_flight(member)
                .is_some_and(|in_flight| accepts(member, in_flight))
        });
        if fits {
            return Some((worker, PlacementKind::Override));
        }
    }
    let (worker, how) = prompt_group::place(
        ring,
        loads,
        &group.slots,
        &group.ranking,
        key,
        accepts,
        written,
    )?;
    let kind = match how {
        GroupPlacement::Preferred => PlacementKind::Group,
        GroupPlacement::Spilled => PlacementKind::GroupSpill,
        GroupPlacement::Balanced => PlacementKind::GroupBalanced,
    };
    Some((worker, kind))
}

/// What placing one request reads: where it goes when no cache ties it to a worker.
pub(super) struct Placing<'a> {
    pub(super) ring: &'a Ring,
    pub(super) loads: &'a CandidateLoads,
    /// The key's placement override, where this request follows one.
    pub(super) moved_to: Option<WorkerId>,
    /// The conversation's system prompt's group, if it is placed within one.
    pub(super) grouping: Option<&'a Grouping>,
    /// For a later turn of a conversation opened before the last ring change, the worker the
    /// plan before the change drew for it (`GroupPlan::drawn_before_change`).
    pub(super) before_change: Option<WorkerId>,
    /// The routing key's (or conversation's) hash; nothing is placed without one.
    pub(super) key: Option<u64>,
    /// A later turn of a conversation: no load bound.
    pub(super) sticky: bool,
    /// A chat conversation's turn (else a plain prompt, under both bounds).
    pub(super) conversation: bool,
    /// The loose in-flight bound of a conversation's opening.
    pub(super) opening_bound: LoadBound,
    /// The in-flight bound of anything else.
    pub(super) bound: LoadBound,
    pub(super) share: &'a ShareBound,
    /// Each ring member's relative recent cache writes, where a first turn may balance them.
    pub(super) balance: Option<&'a [f64]>,
}

impl Placing<'_> {
    pub(super) fn place(&self) -> Option<(WorkerId, PlacementKind)> {
        let key = self.key?;
        let (ring, loads, moved_to) = (self.ring, self.loads, self.moved_to);
        if let Some(grouping) = self.grouping {
            let is_candidate = |worker: WorkerId| {
                ring.member_index(worker)
                    .is_some_and(|member| loads.in_flight(member).is_some())
            };
            let opened_under = self.before_change.filter(|&worker| is_candidate(worker));
            let in_group = if self.sticky {
                match opened_under {
                    // A move some replica made since still comes first.
                    Some(worker) if !moved_to.is_some_and(is_candidate) => {
                        Some((worker, PlacementKind::GroupBeforeChange))
                    }
                    _ => {
                        let any = |_, _| true;
                        place_in_group(ring, moved_to, loads, grouping, key, any, None)
                    }
                }
            } else {
                let bounded = |_, n| self.opening_bound.accepts(n);
                place_in_group(ring, moved_to, loads, grouping, key, bounded, self.balance)
            };
            // No candidate within both bounds: the ring decides, as without a group.
            return in_group.or_else(|| {
                let unbounded = ShareBound::unbounded();
                place(ring, moved_to, loads, self.opening_bound, &unbounded, key)
            });
        }
        if self.sticky {
            place_sticky(ring, moved_to, loads, key)
        } else if self.conversation {
            let unbounded = ShareBound::unbounded();
            place(ring, moved_to, loads, self.opening_bound, &unbounded, key)
        } else {
            place(ring, moved_to, loads, self.bound, self.share, key)
        }
    }
}

/// A system prompt's ranking of the ring's workers and its planned workers.
pub(super) struct Grouping {
    pub(super) ranking: Vec<u32>,
    pub(super) slots: Vec<Slot>,
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
        // One this replica set is private until an event brings it (back).
        overrides.set(6, WorkerId(2));
        assert!(overrides.is_private(6));
        assert_eq!(overrides.get_shared(6), None);
        overrides.apply(6, WorkerId(2));
        assert!(!overrides.is_private(6));
        assert_eq!(overrides.get_shared(6), Some(WorkerId(2)));
        overrides.forget_worker(WorkerId(2));
        assert!(!overrides.is_private(6));
        overrides.set(4, WorkerId(1));
        overrides.set(5, WorkerId(1));
        assert_eq!(
            (overrides.get(4), overrides.get(5)),
            (Some(WorkerId(1)), Some(WorkerId(1)))
        );
    }
}
