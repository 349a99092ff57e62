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

    /// Takes away counts that were added before (so it cannot underflow).
    fn subtract(&mut self, other: &Counts) {
        self.queued -= other.queued;
        self.capacity_refusals -= other.capacity_refusals;
        self.finished -= other.finished;
        self.failed -= other.failed;
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
    /// The totals of the window ending in bucket `summed_at`, kept up to date by records
    /// into that bucket: the detector asks for them on every queued and finished request,
    /// and they only change otherwise when the window moves on to the next bucket.
    /// `summed_at` is `u64::MAX` when they must be summed again.
    sum: Counts,
    summed_at: u64,
}

impl SlidingWindow {
    pub(crate) fn new(window: Duration, now: Instant) -> Self {
        Self {
            origin: now,
            bucket_len: (window / BUCKETS as u32).max(Duration::from_millis(1)),
            buckets: [(u64::MAX, Counts::default()); BUCKETS],
            sum: Counts::default(),
            summed_at: u64::MAX,
        }
    }

    pub(crate) fn record(&mut self, now: Instant, update: impl FnOnce(&mut Counts)) {
        let slot = self.slot(now);
        let bucket = &mut self.buckets[(slot % BUCKETS as u64) as usize];
        if bucket.0 != slot {
            // The bucket's earlier counts are a whole window older: never in `sum`.
            *bucket = (slot, Counts::default());
        }
        if slot == self.summed_at {
            let before = bucket.1;
            update(&mut bucket.1);
            self.sum.add(&bucket.1);
            self.sum.subtract(&before);
        } else {
            update(&mut bucket.1);
            self.summed_at = u64::MAX;
        }
    }

    /// [`Self::totals`], summed again only when the window has moved since the last call.
    pub(crate) fn current_totals(&mut self, now: Instant) -> Counts {
        let current = self.slot(now);
        if current != self.summed_at {
            self.sum = self.totals(now);
            self.summed_at = current;
        }
        self.sum
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

    #[test]
    fn the_kept_totals_are_the_summed_ones() {
        let t0 = Instant::now();
        let mut window = SlidingWindow::new(Duration::from_secs(10), t0);
        let mut kept = SlidingWindow::new(Duration::from_secs(10), t0);
        // Records and reads at times that stay in a bucket, move to the next, skip several,
        // come back to an earlier one, and pass a whole window.
        let steps_ms = [
            0, 10, 900, 1000, 1500, 3700, 3600, 3700, 9999, 12_500, 12_600, 40_000,
        ];
        for (i, ms) in steps_ms.into_iter().enumerate() {
            let now = t0 + Duration::from_millis(ms);
            let refused = i % 3 == 0;
            for w in [&mut window, &mut kept] {
                w.record(now, |c| {
                    c.queued += 1;
                    c.capacity_refusals += u64::from(refused);
                });
            }
            assert_eq!(kept.current_totals(now), window.totals(now), "at {ms} ms");
            let later = now + Duration::from_millis(700);
            assert_eq!(
                kept.current_totals(later),
                window.totals(later),
                "at {ms}+700 ms"
            );
            for w in [&mut window, &mut kept] {
                w.record(later, |c| {
                    c.finished += 1;
                    c.failed += u64::from(!refused);
                });
            }
            assert_eq!(
                kept.current_totals(later),
                window.totals(later),
                "after {ms}+700 ms"
            );
        }
    }
}
