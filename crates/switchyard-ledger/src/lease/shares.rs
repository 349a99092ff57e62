//! This replica's share of a budget's fleet-wide token rate and concurrency, enforced on the
//! hot path without a lock: a GCRA token bucket (one atomic "theoretical arrival time") and
//! an in-flight counter. The ledger hands out shares whose sum stays within the fleet limits
//! (`state::pool`), so enforcing each share locally bounds the whole fleet.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub use crate::command::UNLIMITED_SHARE;

/// Bucket capacity in seconds of the rate: a 1.5 s burst absorbs a client's jitter without
/// letting it spend much beyond its rate.
pub const BURST: Duration = Duration::from_millis(1_500);

/// Retry advice while this replica holds no rate share at all: it waits for a renewal.
const NO_SHARE_RETRY: Duration = Duration::from_secs(1);

const NANOS_PER_S: u128 = 1_000_000_000;

/// Why the shares refused a reservation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShareMiss {
    /// The token bucket is empty; it holds enough again after `retry_after`.
    Rate {
        rate_per_s: u64,
        retry_after: Duration,
    },
    /// `limit` requests are already in flight on this replica.
    Concurrency { limit: u64 },
}

#[derive(Debug)]
pub struct ShareLimiter {
    origin: Instant,
    rate_per_s: AtomicU64,
    concurrency: AtomicU64,
    in_flight: AtomicU64,
    /// GCRA: when the bucket would be full again, in ns since `origin`. The bucket admits a
    /// cost while this stays within `BURST` of now.
    full_at_ns: AtomicU64,
}

impl ShareLimiter {
    /// Unlimited until a grant says otherwise (no grant means the lease refuses anyway).
    pub fn new(origin: Instant) -> Self {
        Self {
            origin,
            rate_per_s: AtomicU64::new(UNLIMITED_SHARE),
            concurrency: AtomicU64::new(UNLIMITED_SHARE),
            in_flight: AtomicU64::new(0),
            full_at_ns: AtomicU64::new(0),
        }
    }

    /// Installs the shares of a new grant. The bucket's level carries over, so a renewal does
    /// not hand out a fresh burst.
    pub fn set_shares(&self, rate_per_s: u64, concurrency: u64) {
        self.rate_per_s.store(rate_per_s, Ordering::Relaxed);
        self.concurrency.store(concurrency, Ordering::Relaxed);
    }

    pub fn rate_per_s(&self) -> u64 {
        self.rate_per_s.load(Ordering::Relaxed)
    }

    pub fn concurrency(&self) -> u64 {
        self.concurrency.load(Ordering::Relaxed)
    }

    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Takes an in-flight slot and `tokens` from the bucket, or neither.
    pub fn try_acquire(&self, tokens: u64, now: Instant) -> Result<(), ShareMiss> {
        let limit = self.concurrency.load(Ordering::Relaxed);
        // Counted even when unlimited, so a share installed mid-request still sees it.
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if before >= limit {
            self.release_slot();
            return Err(ShareMiss::Concurrency { limit });
        }
        if let Err(miss) = self.take_rate(tokens, now) {
            self.release_slot();
            return Err(miss);
        }
        Ok(())
    }

    /// Gives back what `try_acquire` took, replacing the estimate by the real count: the
    /// bucket is refunded, or charged the overshoot (debt paid by waiting).
    pub fn release(&self, estimate: u64, actual: u64) {
        self.release_slot();
        let rate = self.rate_per_s.load(Ordering::Relaxed);
        if rate == UNLIMITED_SHARE || rate == 0 || estimate == actual {
            return;
        }
        let delta = cost_ns(estimate.abs_diff(actual), rate);
        let adjust = |at: u64| {
            Some(if actual > estimate {
                at.saturating_add(delta)
            } else {
                at.saturating_sub(delta)
            })
        };
        // The closure always answers `Some`, so the update cannot fail.
        let _ = self
            .full_at_ns
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, adjust);
    }

    fn release_slot(&self) {
        let _ = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(1))
            });
    }

    fn take_rate(&self, tokens: u64, now: Instant) -> Result<(), ShareMiss> {
        let rate = self.rate_per_s.load(Ordering::Relaxed);
        if rate == UNLIMITED_SHARE {
            return Ok(());
        }
        if rate == 0 {
            return Err(ShareMiss::Rate {
                rate_per_s: 0,
                retry_after: NO_SHARE_RETRY,
            });
        }
        let now_ns = nanos(now.saturating_duration_since(self.origin));
        let burst_ns = nanos(BURST);
        let cost = cost_ns(tokens, rate);
        let mut full_at = self.full_at_ns.load(Ordering::Acquire);
        loop {
            let next = full_at.max(now_ns).saturating_add(cost);
            let over = next.saturating_sub(now_ns).saturating_sub(burst_ns);
            // A request bigger than the whole bucket still passes when the bucket is full;
            // it leaves the bucket in debt, so the average rate holds.
            if over > 0 && full_at > now_ns {
                return Err(ShareMiss::Rate {
                    rate_per_s: rate,
                    retry_after: Duration::from_nanos(over),
                });
            }
            match self.full_at_ns.compare_exchange_weak(
                full_at,
                next,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(()),
                Err(seen) => full_at = seen,
            }
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn cost_ns(tokens: u64, rate_per_s: u64) -> u64 {
    let ns = u128::from(tokens) * NANOS_PER_S / u128::from(rate_per_s.max(1));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_holds_rate_times_burst_and_refills_at_the_rate() {
        let t0 = Instant::now();
        let shares = ShareLimiter::new(t0);
        shares.set_shares(100, UNLIMITED_SHARE);
        // Capacity 150 tokens.
        for _ in 0..15 {
            shares.try_acquire(10, t0).unwrap();
        }
        let miss = shares.try_acquire(10, t0).unwrap_err();
        assert_eq!(
            miss,
            ShareMiss::Rate {
                rate_per_s: 100,
                retry_after: Duration::from_millis(100)
            }
        );
        assert_eq!(shares.in_flight(), 15, "a refused request holds no slot");
        // 100 ms later 10 tokens have flowed back in.
        let later = t0 + Duration::from_millis(100);
        shares.try_acquire(10, later).unwrap();
        assert!(shares.try_acquire(10, later).is_err());
    }

    #[test]
    fn settling_below_the_estimate_refunds_the_bucket() {
        let t0 = Instant::now();
        let shares = ShareLimiter::new(t0);
        shares.set_shares(100, UNLIMITED_SHARE);
        shares.try_acquire(150, t0).unwrap();
        assert!(shares.try_acquire(10, t0).is_err());
        shares.release(150, 50);
        shares.try_acquire(100, t0).unwrap();
        assert!(shares.try_acquire(10, t0).is_err());
        assert_eq!(shares.in_flight(), 1);
    }

    #[test]
    fn a_request_bigger_than_the_bucket_passes_only_when_it_is_full() {
        let t0 = Instant::now();
        let shares = ShareLimiter::new(t0);
        shares.set_shares(10, UNLIMITED_SHARE);
        shares.try_acquire(100, t0).unwrap();
        // 10 s of debt: nothing until it is paid back to within the burst.
        assert!(shares.try_acquire(1, t0 + Duration::from_secs(8)).is_err());
        shares
            .try_acquire(1, t0 + Duration::from_millis(8_600))
            .unwrap();
    }

    #[test]
    fn concurrency_share_caps_in_flight_and_release_frees_a_slot() {
        let t0 = Instant::now();
        let shares = ShareLimiter::new(t0);
        shares.set_shares(UNLIMITED_SHARE, 2);
        shares.try_acquire(1, t0).unwrap();
        shares.try_acquire(1, t0).unwrap();
        assert_eq!(
            shares.try_acquire(1, t0),
            Err(ShareMiss::Concurrency { limit: 2 })
        );
        shares.release(1, 1);
        shares.try_acquire(1, t0).unwrap();
        assert_eq!(shares.in_flight(), 2);
    }

    #[test]
    fn a_zero_share_refuses_everything() {
        let t0 = Instant::now();
        let shares = ShareLimiter::new(t0);
        shares.set_shares(0, UNLIMITED_SHARE);
        assert!(matches!(
            shares.try_acquire(1, t0),
            Err(ShareMiss::Rate { rate_per_s: 0, .. })
        ));
        shares.set_shares(UNLIMITED_SHARE, 0);
        assert_eq!(
            shares.try_acquire(1, t0),
            Err(ShareMiss::Concurrency { limit: 0 })
        );
        assert_eq!(shares.in_flight(), 0);
    }
}
