//! Load-based choices shared by policies: least-loaded selection, the imbalance guard and
//! the bounded-load cap of consistent hashing.

use crate::policy::Candidate;
use crate::ring::Ring;
use std::sync::atomic::{AtomicU64, Ordering};
use switchyard_core::WorkerId;

/// Picks the candidate with the fewest requests in flight.
///
/// Ties rotate: the n-th tied decision takes the (n mod ties)-th tied candidate in slice
/// order. That is deterministic for a given call sequence, yet an idle fleet does not pile
/// every new conversation onto the same worker (which a lowest-id rule would do).
#[derive(Debug, Default)]
pub(crate) struct LeastLoaded {
    tie_rotation: AtomicU64,
}

impl LeastLoaded {
    pub(crate) fn pick(&self, candidates: &[Candidate]) -> Option<WorkerId> {
        let fewest = candidates.iter().map(|c| c.in_flight).min()?;
        let tied = candidates.iter().filter(|c| c.in_flight == fewest);
        let tie_count = tied.clone().count() as u64;
        let turn = self.tie_rotation.fetch_add(1, Ordering::Relaxed);
        let index = usize::try_from(turn % tie_count).ok()?;
        tied.clone().nth(index).map(|c| c.id)
    }
}

/// SGLang-style load guard: the spread of in-flight counts is too large, both absolutely
/// (so a handful of requests on an idle fleet does not trigger it) and relatively.
pub(crate) fn is_imbalanced(
    candidates: &[Candidate],
    abs_threshold: u64,
    rel_threshold: f64,
) -> bool {
    let mut loads = candidates.iter().map(|c| c.in_flight);
    let Some(first) = loads.next() else {
        return false;
    };
    let (min, max) = loads.fold((first, first), |(lo, hi), load| {
        (lo.min(load), hi.max(load))
    });
    max - min > abs_threshold && max as f64 > min as f64 * rel_threshold
}

/// Consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam): a worker takes
/// the request only while its in-flight count is below ⌈factor × (total + 1) / n⌉, the mean
/// over the candidates counting the request being placed. Since factor ≥ 1, some candidate is
/// always below the cap.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct LoadBound {
    capacity: f64,
}

impl LoadBound {
    pub(crate) fn new(candidates: &[Candidate], factor: f64) -> Self {
        let total: u64 = candidates.iter().map(|c| c.in_flight).sum();
        let count = candidates.len().max(1) as f64;
        Self {
            // An unbounded factor means no cap (infinity accepts every count).
            capacity: (factor * (total as f64 + 1.0) / count).ceil(),
        }
    }

    /// The same bound, but a worker with fewer than `min` requests in flight is always
    /// accepted.
    pub(crate) fn at_least(self, min: u64) -> Self {
        Self {
            capacity: self.capacity.max(min as f64),
        }
    }

    pub(crate) fn accepts(self, in_flight: u64) -> bool {
        (in_flight as f64) < self.capacity
    }
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

/// The candidates' in-flight counts indexed by ring member, for the walk around the ring.
pub(crate) struct CandidateLoads {
    /// `NOT_CANDIDATE` for ring members the gateway filtered out.
    by_member: Vec<u64>,
}

const NOT_CANDIDATE: u64 = u64::MAX;

impl CandidateLoads {
    pub(crate) fn new(ring: &Ring, candidates: &[Candidate]) -> Self {
        let mut by_member = vec![NOT_CANDIDATE; ring.members().len()];
        for candidate in candidates {
            if let Some(slot) = ring
                .member_index(candidate.id)
                .and_then(|index| by_member.get_mut(index as usize))
            {
                *slot = candidate.in_flight.min(NOT_CANDIDATE - 1);
            }
        }
        Self { by_member }
    }

    /// None when the member is not a candidate.
    pub(crate) fn in_flight(&self, member: u32) -> Option<u64> {
        self.by_member
            .get(member as usize)
            .copied()
            .filter(|&load| load != NOT_CANDIDATE)
    }

    /// Walks `ring` clockwise from ring index `start` to the first vnode whose worker is a
    /// candidate within `bound`. None if no ring worker qualifies.
    pub(crate) fn place(&self, ring: &Ring, start: usize, bound: LoadBound) -> Option<Placement> {
        self.place_where(ring, start, |_, in_flight| bound.accepts(in_flight))
    }

    /// Like [`Self::place`], with the load test `accepts(member, in_flight)` supplied by the
    /// caller (cache_aware adds a recent-share bound).
    pub(crate) fn place_where(
        &self,
        ring: &Ring,
        start: usize,
        accepts: impl Fn(u32, u64) -> bool,
    ) -> Option<Placement> {
        let mut placement = Placement {
            member: 0,
            skipped_filtered: false,
            skipped_load: false,
        };
        // Allocated on the first rejection only: the common case accepts the first vnode.
        let mut rejected: Vec<bool> = Vec::new();
        for member in ring.clockwise_from(start) {
            if rejected.get(member as usize).copied().unwrap_or(false) {
                continue;
            }
            match self.in_flight(member) {
                Some(in_flight) if accepts(member, in_flight) => {
                    placement.member = member;
                    return Some(placement);
                }
                Some(_) => placement.skipped_load = true,
                None => placement.skipped_filtered = true,
            }
            if rejected.is_empty() {
                rejected = vec![false; ring.members().len()];
            }
            if let Some(slot) = rejected.get_mut(member as usize) {
                *slot = true;
            }
        }
        None
    }
}

/// The candidates sorted by id so cache holders can be looked up by binary search.
/// Built before the tree lock is taken, so the allocation stays out of the critical section.
pub(crate) struct CandidateView {
    by_id: Vec<(WorkerId, u64)>,
}

impl CandidateView {
    pub(crate) fn new(candidates: &[Candidate]) -> Self {
        let mut by_id: Vec<(WorkerId, u64)> =
            candidates.iter().map(|c| (c.id, c.in_flight)).collect();
        by_id.sort_unstable();
        Self { by_id }
    }

    pub(crate) fn in_flight(&self, id: WorkerId) -> Option<u64> {
        self.by_id
            .binary_search_by_key(&id, |&(worker, _)| worker)
            .ok()
            .and_then(|index| self.by_id.get(index))
            .map(|&(_, in_flight)| in_flight)
    }

    pub(crate) fn contains(&self, id: WorkerId) -> bool {
        self.in_flight(id).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(values: &[u64]) -> Vec<Candidate> {
        values
            .iter()
            .enumerate()
            .map(|(i, &in_flight)| Candidate {
                id: WorkerId(i as u32),
                in_flight,
                reported: None,
            })
            .collect()
    }

    #[test]
    fn least_loaded_takes_the_minimum_and_rotates_among_ties() {
        let chooser = LeastLoaded::default();
        assert_eq!(chooser.pick(&loads(&[5, 2, 9])), Some(WorkerId(1)));
        let tied = loads(&[1, 4, 1, 1]);
        let picks: Vec<u32> = (0..6).map(|_| chooser.pick(&tied).unwrap().0).collect();
        // One pick was already spent above, so the rotation starts at the second tie.
        assert_eq!(picks, vec![2, 3, 0, 2, 3, 0]);
        assert_eq!(chooser.pick(&[]), None);
    }

    #[test]
    fn imbalance_needs_both_absolute_and_relative_spread() {
        assert!(is_imbalanced(&loads(&[10, 50]), 32, 1.5));
        // Absolute spread 40 > 32 but 140 < 100 * 1.5.
        assert!(!is_imbalanced(&loads(&[100, 140]), 32, 1.5));
        // Relative spread large but absolute spread only 30.
        assert!(!is_imbalanced(&loads(&[0, 30]), 32, 1.5));
        assert!(!is_imbalanced(&loads(&[7]), 0, 1.0));
        assert!(!is_imbalanced(&[], 0, 1.0));
    }

    #[test]
    fn load_bound_uses_the_mean_including_the_new_request() {
        // Idle fleet: cap = ceil(1.25 × 1 / 4) = 1, so every idle worker accepts.
        let bound = LoadBound::new(&loads(&[0, 0, 0, 0]), 1.25);
        assert!(bound.accepts(0) && !bound.accepts(1));
        // total 40 over 4: cap = ceil(1.25 × 41 / 4) = ceil(12.8) = 13.
        let bound = LoadBound::new(&loads(&[10, 10, 7, 13]), 1.25);
        assert!(bound.accepts(12));
        assert!(!bound.accepts(13));
        // A factor of 1 still leaves room on the least-loaded worker.
        let skewed = loads(&[9, 0]);
        let bound = LoadBound::new(&skewed, 1.0);
        assert!(skewed.iter().any(|c| bound.accepts(c.in_flight)));
        assert!(!bound.accepts(9));
    }

    #[test]
    fn a_floor_accepts_a_lightly_loaded_worker_whatever_the_factor_says() {
        let view = loads(&[1, 0, 0, 0]);
        // cap = ceil(2 × 2 / 4) = 1: even one request in flight is refused.
        let bare = LoadBound::new(&view, 2.0);
        assert!(bare.accepts(0) && !bare.accepts(1));
        let floored = bare.at_least(4);
        assert!(floored.accepts(1) && floored.accepts(3) && !floored.accepts(4));
        // Busier: total 12, cap = ceil(2 × 13 / 4) = 7, above the floor.
        let busy = LoadBound::new(&loads(&[6, 3, 2, 1]), 2.0).at_least(4);
        assert!(busy.accepts(6) && !busy.accepts(7));
        // An unbounded factor accepts everything.
        assert!(LoadBound::new(&view, f64::INFINITY).accepts(u64::MAX));
    }

    #[test]
    fn candidate_view_finds_in_flight_by_id() {
        let view = CandidateView::new(&[
            Candidate {
                id: WorkerId(9),
                in_flight: 3,
                reported: None,
            },
            Candidate {
                id: WorkerId(2),
                in_flight: 8,
                reported: None,
            },
        ]);
        assert_eq!(view.in_flight(WorkerId(2)), Some(8));
        assert_eq!(view.in_flight(WorkerId(9)), Some(3));
        assert!(!view.contains(WorkerId(5)));
    }
}
