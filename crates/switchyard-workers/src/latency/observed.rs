//! Latencies the gateway itself measured on a worker's responses, for workers without a
//! usable `/metrics`. Lock-free cumulative bucket counters, read like a scraped histogram.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::histogram::{HistogramFamily, Series};

/// vLLM's TTFT bucket bounds, so both sources have the same resolution.
const TTFT_BOUNDS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    16.0, 20.0, 30.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's TPOT bounds.
const TPOT_BOUNDS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.075, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
    10.0, 20.0, 40.0, 80.0,
];

#[derive(Debug)]
struct AtomicHistogram {
    bounds: &'static [f64],
    /// Per bucket (not cumulative), the last slot is `+Inf`.
    counts: Box<[AtomicU64]>,
}

impl AtomicHistogram {
    fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    fn observe(&self, seconds: f64) {
        // Prometheus semantics: a value lands in the first bucket whose bound is >= it.
        let index = self.bounds.partition_point(|bound| *bound < seconds);
        if let Some(slot) = self.counts.get(index) {
            slot.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn snapshot(&self) -> HistogramFamily {
        let mut running = 0u64;
        let mut buckets = Vec::with_capacity(self.counts.len());
        for (i, slot) in self.counts.iter().enumerate() {
            running += slot.load(Ordering::Relaxed);
            let le = self.bounds.get(i).copied().unwrap_or(f64::INFINITY);
            buckets.push((le, running as f64));
        }
        let mut family = HistogramFamily::default();
        family.series.insert(
            String::new(),
            Series {
                buckets,
                count: Some(running as f64),
            },
        );
        family
    }
}

#[derive(Debug)]
pub(crate) struct ObservedLatency {
    ttft: AtomicHistogram,
    tpot: AtomicHistogram,
}

impl Default for ObservedLatency {
    fn default() -> Self {
        Self {
            ttft: AtomicHistogram::new(TTFT_BOUNDS),
            tpot: AtomicHistogram::new(TPOT_BOUNDS),
        }
    }
}

impl ObservedLatency {
    pub(crate) fn observe(&self, ttft: Duration, tpot: Option<Duration>) {
        self.ttft.observe(ttft.as_secs_f64());
        if let Some(tpot) = tpot {
            self.tpot.observe(tpot.as_secs_f64());
        }
    }

    /// `(ttft, tpot)` as cumulative families, deltas computed like a scrape's.
    pub(crate) fn snapshot(&self) -> (HistogramFamily, HistogramFamily) {
        (self.ttft.snapshot(), self.tpot.snapshot())
    }
}

#[cfg(test)]
mod tests {
    use super::super::histogram::{quantile, sample_count, window_delta};
    use super::*;

    #[test]
    fn observations_become_cumulative_buckets() {
        let observed = ObservedLatency::default();
        let (before_ttft, _) = observed.snapshot();
        for _ in 0..9 {
            observed.observe(Duration::from_millis(50), Some(Duration::from_millis(20)));
        }
        observed.observe(Duration::from_secs(35), None);
        let (ttft, tpot) = observed.snapshot();
        let delta = window_delta(&before_ttft, &ttft);
        assert_eq!(sample_count(&delta), 10);
        let p90 = quantile(0.9, &delta).unwrap();
        assert!(p90 > 0.04 && p90 <= 0.06, "p90 {p90}");
        let p99 = quantile(0.99, &delta).unwrap();
        assert!(p99 > 30.0, "p99 {p99}");
        let tpot_delta = window_delta(&HistogramFamily::default(), &tpot);
        assert_eq!(sample_count(&tpot_delta), 9);
    }

    #[test]
    fn exact_bound_lands_in_that_bucket() {
        let h = AtomicHistogram::new(&[1.0, 2.0]);
        h.observe(1.0);
        h.observe(5.0);
        let family = h.snapshot();
        let series = &family.series[""];
        assert_eq!(
            series.buckets,
            vec![(1.0, 1.0), (2.0, 1.0), (f64::INFINITY, 2.0)]
        );
    }
}
