//! The consistent-hash ring: virtual nodes placed by hashing worker NAMES, so every gateway
//! replica (each with its own per-process `WorkerId`s) builds the same ring from the same fleet.
//!
//! A ring is immutable once built; membership changes build a new one and publish it (see
//! `membership`), so the request path reads it without locks.

mod movement;
#[cfg(test)]
mod tests;

pub(crate) use movement::moved_share;

use crate::hash::stable_hash_seeded;
use crate::load::{CandidateLoads, LoadBound};
use std::sync::Arc;
use switchyard_core::WorkerId;

#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub(crate) id: WorkerId,
    pub(crate) name: Arc<str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Point {
    position: u64,
    /// Index into `members`; members are sorted by name, so ties order the same everywhere.
    member: u32,
}

#[derive(Debug, Default)]
pub(crate) struct Ring {
    points: Vec<Point>,
    /// Sorted by name.
    members: Vec<Member>,
    /// (id, member index), sorted by id.
    by_id: Vec<(WorkerId, u32)>,
}

/// Where a walk around the ring stopped, and what it passed on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    pub(crate) member: u32,
    /// It passed a vnode whose worker is not a candidate (filtered by the gateway).
    pub(crate) skipped_filtered: bool,
    /// It passed a candidate above the load bound.
    pub(crate) skipped_load: bool,
}

impl Ring {
    /// Builds the ring of `members` with `vnodes` virtual nodes each; vnode `v` of a worker
    /// sits at `stable_hash_seeded(name, v)`.
    pub(crate) fn build(members: impl IntoIterator<Item = Member>, vnodes: u32) -> Self {
        let mut members: Vec<Member> = members.into_iter().collect();
        members.sort_by(|a, b| a.name.cmp(&b.name));
        let mut points = Vec::with_capacity(members.len() * vnodes as usize);
        for (index, member) in (0u32..).zip(&members) {
            for vnode in 0..vnodes {
                points.push(Point {
                    position: stable_hash_seeded(member.name.as_bytes(), u64::from(vnode)),
                    member: index,
                });
            }
        }
        points.sort_unstable();
        let mut by_id: Vec<(WorkerId, u32)> =
            (0u32..).zip(&members).map(|(i, m)| (m.id, i)).collect();
        by_id.sort_unstable();
        Self {
            points,
            members,
            by_id,
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    pub(crate) fn vnode_count(&self) -> usize {
        self.points.len()
    }

    pub(crate) fn member(&self, index: u32) -> Option<&Member> {
        self.members.get(index as usize)
    }

    pub(crate) fn member_index(&self, id: WorkerId) -> Option<u32> {
        let at = self.by_id.binary_search_by_key(&id, |&(w, _)| w).ok()?;
        self.by_id.get(at).map(|&(_, index)| index)
    }

    pub(crate) fn name_of(&self, id: WorkerId) -> Option<&Arc<str>> {
        self.member(self.member_index(id)?).map(|m| &m.name)
    }

    pub(crate) fn id_of(&self, name: &str) -> Option<WorkerId> {
        let at = self
            .members
            .binary_search_by(|m| m.name.as_ref().cmp(name))
            .ok()?;
        self.members.get(at).map(|m| m.id)
    }

    /// Index of the first vnode at or clockwise after `hash`.
    pub(crate) fn successor(&self, hash: u64) -> usize {
        let at = self.points.partition_point(|p| p.position < hash);
        if at == self.points.len() { 0 } else { at }
    }

    /// The member owning `hash` with nothing filtered and no load bound.
    pub(crate) fn owner(&self, hash: u64) -> Option<u32> {
        self.points.get(self.successor(hash)).map(|p| p.member)
    }

    /// Ring index where the `nth` (0-based) distinct worker clockwise from `hash` first
    /// appears; `nth` wraps around the number of workers.
    pub(crate) fn nth_distinct_from(&self, hash: u64, nth: usize) -> usize {
        let start = self.successor(hash);
        let nth = nth % self.members.len().max(1);
        let mut seen: Vec<u32> = Vec::with_capacity(nth + 1);
        for step in 0..self.points.len() {
            let index = (start + step) % self.points.len();
            let member = self.points[index].member;
            if !seen.contains(&member) {
                if seen.len() == nth {
                    return index;
                }
                seen.push(member);
            }
        }
        start
    }

    /// The first `count` distinct members clockwise from `hash` (fewer if the ring has fewer).
    pub(crate) fn distinct_members_from(&self, hash: u64, count: usize) -> Vec<u32> {
        let start = self.successor(hash);
        let mut members: Vec<u32> = Vec::with_capacity(count);
        for step in 0..self.points.len() {
            if members.len() >= count {
                break;
            }
            let member = self.points[(start + step) % self.points.len()].member;
            if !members.contains(&member) {
                members.push(member);
            }
        }
        members
    }

    /// Walks clockwise from ring index `start` to the first vnode whose worker is a candidate
    /// within the load bound. None if no ring worker qualifies.
    pub(crate) fn place(
        &self,
        start: usize,
        loads: &CandidateLoads,
        bound: LoadBound,
    ) -> Option<Placement> {
        self.place_where(start, loads, |_, in_flight| bound.accepts(in_flight))
    }

    /// Like [`Self::place`], with the load test `accepts(member, in_flight)` supplied by the
    /// caller (cache_aware adds a recent-share bound).
    pub(crate) fn place_where(
        &self,
        start: usize,
        loads: &CandidateLoads,
        accepts: impl Fn(u32, u64) -> bool,
    ) -> Option<Placement> {
        let len = self.points.len();
        let mut placement = Placement {
            member: 0,
            skipped_filtered: false,
            skipped_load: false,
        };
        // Allocated on the first rejection only: the common case accepts the first vnode.
        let mut rejected: Vec<bool> = Vec::new();
        for step in 0..len {
            let member = self.points[(start + step) % len].member;
            if rejected.get(member as usize).copied().unwrap_or(false) {
                continue;
            }
            match loads.in_flight(member) {
                Some(in_flight) if accepts(member, in_flight) => {
                    placement.member = member;
                    return Some(placement);
                }
                Some(_) => placement.skipped_load = true,
                None => placement.skipped_filtered = true,
            }
            if rejected.is_empty() {
                rejected = vec![false; self.members.len()];
            }
            if let Some(slot) = rejected.get_mut(member as usize) {
                *slot = true;
            }
        }
        None
    }
}

#[cfg(test)]
impl Ring {
    pub(crate) fn points_member(&self, index: usize) -> u32 {
        self.points[index].member
    }
}
