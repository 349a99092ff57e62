//! Warmup bookkeeping: period spend (warmup vs. everything else), the in-flight reservation
//! that keeps concurrent warmups within the budget, measured mean cost, retry amplification,
//! and hit judging (a warmup is a hit when real traffic uses the resource within the hit
//! window). Atomics only: `note_spend` and `note_use` run on the request path.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::clock::UnixMillis;
use crate::resource::ResourceCell;

pub(crate) struct Books {
    period_ms: u64,
    period_index: AtomicU64,
    warmup_tokens: AtomicU64,
    traffic_tokens: AtomicU64,
    /// Estimates of warmups in flight, so concurrent warmups cannot overshoot together.
    reserved: AtomicU64,
    cost_samples: AtomicU64,
    cost_sum: AtomicU64,
    retry_amplification_bits: AtomicU64,
}

impl Books {
    pub(crate) fn new(period_ms: u64, now: UnixMillis) -> Self {
        let period_ms = period_ms.max(1);
        Self {
            period_ms,
            period_index: AtomicU64::new(now / period_ms),
            warmup_tokens: AtomicU64::new(0),
            traffic_tokens: AtomicU64::new(0),
            reserved: AtomicU64::new(0),
            cost_samples: AtomicU64::new(0),
            cost_sum: AtomicU64::new(0),
            retry_amplification_bits: AtomicU64::new(1.0f64.to_bits()),
        }
    }

    /// Starts a new period's spend when `now` has left the stored one.
    pub(crate) fn roll(&self, now: UnixMillis) {
        let index = now / self.period_ms;
        let stored = self.period_index.load(Ordering::Acquire);
        if index > stored
            && self
                .period_index
                .compare_exchange(stored, index, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.warmup_tokens.store(0, Ordering::Release);
            self.traffic_tokens.store(0, Ordering::Release);
        }
    }

    /// Holds `estimate` against the budget; false (nothing held) when it does not fit.
    pub(crate) fn reserve(&self, estimate: u64, budget: u64, now: UnixMillis) -> bool {
        self.roll(now);
        let before = self.reserved.fetch_add(estimate, Ordering::AcqRel);
        let spent = self.warmup_tokens.load(Ordering::Acquire);
        if spent.saturating_add(before).saturating_add(estimate) > budget {
            self.reserved.fetch_sub(estimate, Ordering::AcqRel);
            return false;
        }
        true
    }

    /// Replaces a reservation by the real spend.
    pub(crate) fn settle(&self, estimate: u64, spent: u64, spends_quota: bool, now: UnixMillis) {
        self.reserved.fetch_sub(estimate, Ordering::AcqRel);
        self.roll(now);
        self.warmup_tokens.fetch_add(spent, Ordering::AcqRel);
        if spends_quota && spent > 0 {
            self.cost_samples.fetch_add(1, Ordering::Relaxed);
            self.cost_sum.fetch_add(spent, Ordering::Relaxed);
        }
    }

    pub(crate) fn note_traffic(&self, tokens: u64, now: UnixMillis) {
        self.roll(now);
        self.traffic_tokens.fetch_add(tokens, Ordering::AcqRel);
    }

    pub(crate) fn warmup_spent(&self) -> u64 {
        self.warmup_tokens.load(Ordering::Acquire)
    }

    /// Warmup spend / total spend this period; None before anything was spent.
    pub(crate) fn cost_ratio(&self) -> Option<f64> {
        let warmup = self.warmup_tokens.load(Ordering::Acquire);
        let total = warmup + self.traffic_tokens.load(Ordering::Acquire);
        (total > 0).then(|| warmup as f64 / total as f64)
    }

    /// Measured mean cost once `min_samples` quota-spending warmups reported usage.
    pub(crate) fn measured_mean_cost(&self, min_samples: u64) -> Option<f64> {
        let samples = self.cost_samples.load(Ordering::Relaxed);
        (samples >= min_samples.max(1))
            .then(|| self.cost_sum.load(Ordering::Relaxed) as f64 / samples as f64)
    }

    pub(crate) fn set_retry_amplification(&self, value: f64) {
        if value.is_finite() && value >= 1.0 {
            self.retry_amplification_bits
                .store(value.to_bits(), Ordering::Relaxed);
        }
    }

    pub(crate) fn retry_amplification(&self) -> f64 {
        f64::from_bits(self.retry_amplification_bits.load(Ordering::Relaxed))
    }
}

/// What `note_use` found, for the first-request histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UseClass {
    /// The first use of a warmup inside the hit window.
    pub(crate) hit: bool,
    /// First use since the last warmup, while still warm.
    pub(crate) first_after_warmup: bool,
    /// First use after the resource went cold (or ever).
    pub(crate) cold: bool,
}

pub(crate) fn note_use(
    cell: &ResourceCell,
    now: UnixMillis,
    hit_window_ms: u64,
    cold_after_ms: u64,
) -> UseClass {
    let previous_use = cell.last_used.swap(now, Ordering::AcqRel);
    let warmed = cell.last_warmed.load(Ordering::Acquire);
    let pending = cell.pending_hit.load(Ordering::Acquire);
    let hit = pending != 0
        && now.saturating_sub(pending) <= hit_window_ms
        && cell
            .pending_hit
            .compare_exchange(pending, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
    if hit {
        cell.hits.fetch_add(1, Ordering::Relaxed);
    }
    let latest = previous_use.max(warmed);
    UseClass {
        hit,
        first_after_warmup: warmed != 0
            && warmed > previous_use
            && now.saturating_sub(warmed) < cold_after_ms,
        cold: latest == 0 || now.saturating_sub(latest) >= cold_after_ms,
    }
}

/// A successful warmup starts waiting for its first use; a previous warmup still waiting
/// is judged a miss (it was never used before being redone). Returns misses counted.
pub(crate) fn note_warmed(cell: &ResourceCell, now: UnixMillis) -> u64 {
    cell.last_warmed.store(now, Ordering::Release);
    let previous = cell.pending_hit.swap(now, Ordering::AcqRel);
    if previous != 0 {
        cell.misses.fetch_add(1, Ordering::Relaxed);
        1
    } else {
        0
    }
}

/// Judges warmups whose hit window passed unused as misses. Returns misses counted.
pub(crate) fn expire_pending(cell: &ResourceCell, now: UnixMillis, hit_window_ms: u64) -> u64 {
    let pending = cell.pending_hit.load(Ordering::Acquire);
    if pending != 0
        && now.saturating_sub(pending) > hit_window_ms
        && cell
            .pending_hit
            .compare_exchange(pending, 0, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    {
        cell.misses.fetch_add(1, Ordering::Relaxed);
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ResourceConfig, ResourceKind, Tier, WarmupConfig};
    use crate::resource::WarmupResource;
    use switchyard_router::RoutingKeyConfig;

    const MIN: u64 = 60_000;

    fn cell() -> ResourceCell {
        let config = ResourceConfig::new("r", ResourceKind::Context, Tier::L0);
        ResourceCell::new(WarmupResource::from_config(
            &config,
            &RoutingKeyConfig::default(),
            &WarmupConfig::default(),
        ))
    }

    #[test]
    fn hit_within_five_minutes_miss_after_and_cold_first_requests() {
        let c = cell();
        let t0 = 1_000 * MIN;
        let first = note_use(&c, t0, 5 * MIN, 15 * MIN);
        assert!(first.cold && !first.hit, "never warmed, never used");
        note_warmed(&c, t0 + 20 * MIN);
        let used = note_use(&c, t0 + 24 * MIN, 5 * MIN, 15 * MIN);
        assert!(used.hit && used.first_after_warmup && !used.cold);
        let again = note_use(&c, t0 + 25 * MIN, 5 * MIN, 15 * MIN);
        assert!(
            !again.hit && !again.first_after_warmup,
            "one hit per warmup"
        );
        note_warmed(&c, t0 + 60 * MIN);
        assert_eq!(
            expire_pending(&c, t0 + 64 * MIN, 5 * MIN),
            0,
            "still inside"
        );
        assert_eq!(expire_pending(&c, t0 + 66 * MIN, 5 * MIN), 1);
        let late = note_use(&c, t0 + 67 * MIN, 5 * MIN, 15 * MIN);
        assert!(!late.hit && late.first_after_warmup);
        assert_eq!(c.hit_rate(2), Some(0.5));
    }

    #[test]
    fn reservations_keep_concurrent_warmups_inside_the_budget() {
        let books = Books::new(86_400_000, 0);
        assert!(books.reserve(600, 1_000, 1));
        assert!(!books.reserve(600, 1_000, 1), "600 + 600 > 1000");
        books.settle(600, 500, true, 2);
        assert!(books.reserve(500, 1_000, 3));
        books.note_traffic(3_000, 4);
        assert_eq!(books.cost_ratio(), Some(500.0 / 3_500.0));
        assert_eq!(books.measured_mean_cost(1), Some(500.0));
        books.roll(86_400_000);
        assert_eq!(
            (books.warmup_spent(), books.cost_ratio()),
            (0, None),
            "new day"
        );
    }
}
