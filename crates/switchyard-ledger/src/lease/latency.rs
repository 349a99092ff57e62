//! The latencies a node's leases are sized for: how long a renewal takes to commit and how
//! long a spend-journal sync takes, as observed on this node. A lease sized for a 1 ms disk
//! and a 190 ms commit runs dry when the leader's disk slows to 150 ms syncs and 350 ms
//! commits; sizing it from what was actually seen lately keeps requests off the wait path.
//!
//! Each is a decaying maximum: a sample raises it at once, and it halves every `half_life`
//! without a larger one, so one slow fsync widens leases for a while and a quiet disk brings
//! them back. Time is passed in (the lease table's clock), never read here.

use parking_lot::Mutex;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct LatencyTracker {
    half_life: Duration,
    /// Samples above this count as this: one pathological wait (a timed-out write retried)
    /// must not size leases for minutes.
    cap: Duration,
    last: Mutex<Option<(Duration, Instant)>>,
}

impl LatencyTracker {
    pub fn new(half_life: Duration, cap: Duration) -> Self {
        Self {
            half_life,
            cap,
            last: Mutex::new(None),
        }
    }

    /// Records one observed latency at `now`.
    pub fn observe(&self, sample: Duration, now: Instant) {
        let mut last = self.last.lock();
        let decayed = decay(*last, self.half_life, now);
        *last = Some((sample.min(self.cap).max(decayed), now));
    }

    /// The decayed maximum as of `now` (zero before any sample).
    pub fn current(&self, now: Instant) -> Duration {
        decay(*self.last.lock(), self.half_life, now)
    }
}

fn decay(last: Option<(Duration, Instant)>, half_life: Duration, now: Instant) -> Duration {
    let Some((value, at)) = last else {
        return Duration::ZERO;
    };
    let elapsed = now.saturating_duration_since(at).as_secs_f64();
    let half_lives = elapsed / half_life.as_secs_f64().max(f64::MIN_POSITIVE);
    value.mul_f64(0.5_f64.powf(half_lives))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HALF: Duration = Duration::from_secs(10);
    const CAP: Duration = Duration::from_secs(2);

    /// Whole milliseconds (the decay goes through `f64`).
    fn ms(d: Duration) -> u128 {
        (d.as_secs_f64() * 1000.0).round() as u128
    }

    #[test]
    fn a_slow_sample_counts_at_once_and_halves_every_half_life() {
        let t0 = Instant::now();
        let tracker = LatencyTracker::new(HALF, CAP);
        assert_eq!(tracker.current(t0), Duration::ZERO);
        tracker.observe(Duration::from_millis(1), t0);
        tracker.observe(Duration::from_millis(400), t0);
        tracker.observe(Duration::from_millis(2), t0);
        assert_eq!(ms(tracker.current(t0)), 400);
        assert_eq!(ms(tracker.current(t0 + HALF)), 200);
        assert_eq!(ms(tracker.current(t0 + HALF * 2)), 100);
        // A smaller sample later does not pull the maximum below its decayed value.
        tracker.observe(Duration::from_millis(50), t0 + HALF * 2);
        assert_eq!(ms(tracker.current(t0 + HALF * 2)), 100);
        // A larger one replaces it.
        tracker.observe(Duration::from_millis(300), t0 + HALF * 2);
        assert_eq!(ms(tracker.current(t0 + HALF * 3)), 150);
    }

    #[test]
    fn samples_are_capped() {
        let t0 = Instant::now();
        let tracker = LatencyTracker::new(HALF, CAP);
        tracker.observe(Duration::from_secs(30), t0);
        assert_eq!(tracker.current(t0), CAP);
    }
}
