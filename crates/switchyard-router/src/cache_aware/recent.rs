//! Each worker's recent share of this replica's requests: an exponentially decayed count of
//! the requests routed to it. Placement bounds new keys by it as well as by in-flight counts,
//! because at low concurrency in-flight counts (zero, one or two per worker) are too coarse to
//! tell a worker carrying a heavy session from an idle one.

use crate::policy::Candidate;
use std::collections::HashMap;
use std::time::Duration;
use switchyard_core::WorkerId;

/// Rescale once a fresh request would weigh 2^this, long before f64 loses precision.
const RESCALE_EXPONENT: f64 = 64.0;

/// Counts are stored scaled by 2^((t − origin) / half-life) at the time t they were added, so
/// decaying every entry at once is a no-op: entries read at the same moment compare as they
/// are, and only a new request's weight grows with time.
#[derive(Debug)]
pub(super) struct RecentLoad {
    half_life_secs: f64,
    origin_secs: f64,
    scaled: HashMap<WorkerId, f64>,
}

/// The share bound for one decision: a member is accepted while its recent count stays below
/// `factor` × the mean over the candidates, counting the request being placed.
#[derive(Debug)]
pub(super) struct ShareBound {
    cap: f64,
    /// Scaled recent count by ring member index.
    by_member: Vec<f64>,
}

impl ShareBound {
    /// Accepts every member.
    pub(super) fn unbounded() -> Self {
        Self {
            cap: f64::INFINITY,
            by_member: Vec::new(),
        }
    }

    pub(super) fn accepts(&self, member: u32) -> bool {
        self.by_member
            .get(member as usize)
            .is_none_or(|&count| count < self.cap)
    }
}

impl RecentLoad {
    pub(super) fn new(half_life: Duration) -> Self {
        Self {
            half_life_secs: half_life.as_secs_f64().max(f64::MIN_POSITIVE),
            origin_secs: 0.0,
            scaled: HashMap::new(),
        }
    }

    /// The scaled weight of one request routed at `now`.
    fn weight(&mut self, now: Duration) -> f64 {
        let exponent = ((now.as_secs_f64() - self.origin_secs) / self.half_life_secs).max(0.0);
        if exponent < RESCALE_EXPONENT {
            return exponent.exp2();
        }
        let shrink = (-exponent).exp2();
        self.scaled.retain(|_, count| {
            *count *= shrink;
            // Below one request in 2^-40: nothing left worth remembering.
            *count > 1e-12
        });
        self.origin_secs = now.as_secs_f64();
        1.0
    }

    /// Counts one request routed to `worker` at `now`.
    pub(super) fn record(&mut self, worker: WorkerId, now: Duration) {
        self.record_amount(worker, 1.0, now);
    }

    /// Counts `amount` (of whatever this instance tracks) for `worker` at `now`.
    pub(super) fn record_amount(&mut self, worker: WorkerId, amount: f64, now: Duration) {
        let weight = self.weight(now) * amount;
        *self.scaled.entry(worker).or_insert(0.0) += weight;
    }

    /// `worker`'s decayed count on a scale shared by every worker at one moment: compare it
    /// with other workers' read at the same time, never with an earlier reading.
    pub(super) fn relative(&self, worker: WorkerId) -> f64 {
        self.scaled.get(&worker).copied().unwrap_or(0.0)
    }

    /// The bound for placing one request at `now`: the mean is taken over `candidates`;
    /// `members` are the ring's workers by member index. `by_member` is a buffer allocated
    /// before the policy lock was taken.
    pub(super) fn bound(
        &mut self,
        candidates: &[Candidate],
        members: impl Iterator<Item = WorkerId>,
        factor: f64,
        now: Duration,
        mut by_member: Vec<f64>,
    ) -> ShareBound {
        let weight = self.weight(now);
        let count = |id: WorkerId| self.scaled.get(&id).copied().unwrap_or(0.0);
        let total: f64 = candidates.iter().map(|c| count(c.id)).sum();
        by_member.clear();
        by_member.extend(members.map(count));
        let cap = factor * (total + weight) / candidates.len().max(1) as f64;
        ShareBound { cap, by_member }
    }

    pub(super) fn forget(&mut self, worker: WorkerId) {
        self.scaled.remove(&worker);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(value: f64) -> Duration {
        Duration::from_secs_f64(value)
    }

    fn bound_at(recent: &mut RecentLoad, workers: &[u32], now: f64) -> ShareBound {
        let candidates: Vec<Candidate> = workers
            .iter()
            .map(|&id| Candidate {
                id: WorkerId(id),
                in_flight: 0,
                reported: None,
            })
            .collect();
        let members = workers.iter().map(|&id| WorkerId(id));
        recent.bound(&candidates, members, 1.0, secs(now), Vec::new())
    }

    #[test]
    fn a_worker_above_its_share_is_refused_until_its_traffic_decays() {
        let mut recent = RecentLoad::new(secs(10.0));
        for _ in 0..6 {
            recent.record(WorkerId(0), secs(0.0));
        }
        recent.record(WorkerId(1), secs(0.0));
        // Counts 6, 1, 0, 0: cap = (7 + 1) / 4 = 2.
        let bound = bound_at(&mut recent, &[0, 1, 2, 3], 0.0);
        assert!(!bound.accepts(0));
        assert!(bound.accepts(1) && bound.accepts(2) && bound.accepts(3));
        // Forty seconds (four half-lives) on, the old burst weighs 6/16 against a fresh
        // request's 1: worker 0 is back under the mean and accepted again.
        recent.record(WorkerId(1), secs(40.0));
        recent.record(WorkerId(2), secs(40.0));
        let bound = bound_at(&mut recent, &[0, 1, 2, 3], 40.0);
        assert!(bound.accepts(0));
        assert!(!bound.accepts(1) && !bound.accepts(2));
    }

    #[test]
    fn an_idle_fleet_accepts_everyone_and_some_worker_always_fits() {
        let mut recent = RecentLoad::new(secs(5.0));
        let bound = bound_at(&mut recent, &[0, 1, 2], 0.0);
        assert!((0..3).all(|member| bound.accepts(member)));
        for (worker, count) in [(0, 9), (1, 2), (2, 7)] {
            for _ in 0..count {
                recent.record(WorkerId(worker), secs(1.0));
            }
        }
        let bound = bound_at(&mut recent, &[0, 1, 2], 1.0);
        assert_eq!(
            (0..3).filter(|&m| bound.accepts(m)).collect::<Vec<_>>(),
            vec![1]
        );
    }

    #[test]
    fn rescaling_after_a_long_time_keeps_the_comparisons() {
        let mut recent = RecentLoad::new(secs(1.0));
        recent.record(WorkerId(0), secs(0.0));
        // 100 half-lives: the weight would be 2^100, so the counts are rescaled.
        for _ in 0..3 {
            recent.record(WorkerId(1), secs(100.0));
        }
        recent.record(WorkerId(2), secs(100.0));
        assert!(recent.origin_secs > 0.0);
        let bound = bound_at(&mut recent, &[0, 1, 2], 100.0);
        // Counts ≈ 0, 3, 1: cap = (4 + 1) / 3 ≈ 1.67.
        assert!(bound.accepts(0) && !bound.accepts(1) && bound.accepts(2));
        recent.forget(WorkerId(1));
        assert!(bound_at(&mut recent, &[0, 1, 2], 100.0).accepts(1));
    }
}
