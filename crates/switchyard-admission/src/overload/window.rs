//! Event counts over a sliding time window, in ten buckets, driven by the injected clock.

use std::time::{Duration, Instant};

const BUCKETS: usize = 10;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Requests that reached the priority queues…
    pub(crate) queued: u64,
    /// …and of those, refused for capacity (queue timeout or queue full).
    pub(crate) capacity_refusals: u64,
    /// Admitted requests that finished…
    pub(crate) finished: u64,
    /// …and of those, failed.
    pub(crate) failed: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.queued += other.queued;
        self.capacity_refusals += other.capacity_refusals;
        self.finished += other.finished;
        self.failed += other.failed;
    }

    /// Capacity refusals per queued request, if there were at least `min_samples`.
    pub(crate) fn refusal_rate(&self, min_samples: u64) -> Option<f64> {
        rate(self.capacity_refusals, self.queued, min_samples)
    }

    /// Failures per finished request, if there were at least `min_samples`.
    pub(crate) fn error_rate(&self, min_samples: u64) -> Option<f64> {
        rate(self.failed, self.finished, min_samples)
    }
}

fn rate(part: u64, whole: u64, min_samples: u64) -> Option<f64> {
    (whole >= min_samples.max(1)).then(|| part as f64 / whole as f64)
}

pub(crate) struct SlidingWindow {
    origin: Instant,
    bucket_len: Duration,
    buckets: [(u64, Counts); BUCKETS],
}

impl SlidingWindow {
    pub(crate) fn new(window: Duration, now: Instant) -> Self {
        Self {
            origin: now,
            bucket_len: (window / BUCKETS as u32).max(Duration::from_millis(1)),
            buckets: [(u64::MAX, Counts::default()); BUCKETS],
        }
    }

    pub(crate) fn record(&mut self, now: Instant, update: impl FnOnce(&mut Counts)) {
        let slot = self.slot(now);
        let bucket = &mut self.buckets[(slot % BUCKETS as u64) as usize];
        if bucket.0 != slot {
            *bucket = (slot, Counts::default());
        }
        update(&mut bucket.1);
    }

    pub(crate) fn totals(&self, now: Instant) -> Counts {
        let current = self.slot(now);
        let oldest = current.saturating_sub(BUCKETS as u64 - 1);
        let mut totals = Counts::default();
        for (slot, counts) in &self.buckets {
            if (oldest..=current).contains(slot) {
                totals.add(counts);
            }
        }
        totals
    }

    fn slot(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.origin);
        (elapsed.as_nanos() / self.bucket_len.as_nanos()) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_leave_the_window_after_it_passes() {
        let t0 = Instant::now();
        let mut window = SlidingWindow::new(Duration::from_secs(10), t0);
        window.record(t0, |c| c.queued += 10);
        window.record(t0 + Duration::from_secs(5), |c| {
            c.queued += 10;
            c.capacity_refusals += 5;
        });
        let at_6 = window.totals(t0 + Duration::from_secs(6));
        assert_eq!((at_6.queued, at_6.capacity_refusals), (20, 5));
        assert_eq!(at_6.refusal_rate(20), Some(0.25));
        assert_eq!(at_6.refusal_rate(21), None, "too few samples");
        let at_11 = window.totals(t0 + Duration::from_secs(11));
        assert_eq!(at_11.queued, 10, "the first second has slid out");
        assert_eq!(
            window.totals(t0 + Duration::from_secs(60)),
            Counts::default()
        );
    }
}
