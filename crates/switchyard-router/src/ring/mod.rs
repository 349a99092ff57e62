//! The consistent-hash ring: virtual nodes placed by hashing worker NAMES, so every gateway
//! replica (each with its own per-process `WorkerId`s) builds the same ring from the same fleet.
//!
//! A ring is immutable once built; membership changes build a new one and publish it (see
//! `membership`), so the request path reads it without locks.

mod config;
pub(crate) mod movement;
#[cfg(test)]
mod tests;

pub use config::ConsistentHashConfig;

use crate::hash::stable_hash_seeded;
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

    /// The member of every vnode clockwise from ring index `start`, once around the ring.
    pub(crate) fn clockwise_from(&self, start: usize) -> impl Iterator<Item = u32> + '_ {
        let len = self.points.len();
        (0..len).filter_map(move |step| self.points.get((start + step) % len).map(|p| p.member))
    }
}

#[cfg(test)]
impl Ring {
    pub(crate) fn points_member(&self, index: usize) -> u32 {
        self.points[index].member
    }
}
