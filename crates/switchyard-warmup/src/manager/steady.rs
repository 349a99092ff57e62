//! The steady-state p95 a warmup wave's latency is judged against (advance only
//! while the wave's p95 < 2 × steady). Measured from business traffic the gateway served:
//! the owner hands in its cumulative latency histogram now and then, and the p95 comes from
//! the difference between the newest snapshot and the one a window earlier (recent traffic,
//! not lifetime totals). Too few requests in the window, or no recent snapshot, and the
//! configured `warmup.ramp.steady_p95_ms` stands in.

use serde::Serialize;
use std::collections::VecDeque;

use crate::clock::{UnixMillis, secs_to_ms};
use crate::config::WarmupRampConfig;

/// A cumulative latency histogram as Prometheus keeps it: `cumulative_counts[i]` requests
/// took at most `upper_bounds_secs[i]`; `count` includes the ones above the last bound.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencyHistogram {
    pub upper_bounds_secs: Vec<f64>,
    pub cumulative_counts: Vec<u64>,
    pub count: u64,
}

impl LatencyHistogram {
    /// Requests between `earlier` and `self`, bucket by bucket; None when the buckets differ.
    fn since(&self, earlier: &LatencyHistogram) -> Option<LatencyHistogram> {
        if self.upper_bounds_secs != earlier.upper_bounds_secs
            || self.cumulative_counts.len() != earlier.cumulative_counts.len()
        {
            return None;
        }
        Some(LatencyHistogram {
            upper_bounds_secs: self.upper_bounds_secs.clone(),
            cumulative_counts: self
                .cumulative_counts
                .iter()
                .zip(&earlier.cumulative_counts)
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
            count: self.count.saturating_sub(earlier.count),
        })
    }

    /// The 95th percentile, interpolated inside its bucket as `histogram_quantile` does; a
    /// rank beyond the last finite bound reports that bound.
    fn p95_secs(&self) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let rank = (self.count as f64 * 0.95).ceil();
        let mut lower_bound = 0.0;
        let mut below = 0u64;
        for (&bound, &cumulative) in self.upper_bounds_secs.iter().zip(&self.cumulative_counts) {
            if cumulative as f64 >= rank {
                let in_bucket = cumulative.saturating_sub(below).max(1) as f64;
                let share = (rank - below as f64) / in_bucket;
                return Some(lower_bound + (bound - lower_bound) * share);
            }
            lower_bound = bound;
            below = cumulative;
        }
        self.upper_bounds_secs.last().copied()
    }
}

/// Where a wave's steady p95 came from; one counter per branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SteadySource {
    /// Measured on business traffic over the window.
    Observed,
    /// The window held fewer requests than `steady_min_samples`: configured value.
    TooFewSamples,
    /// No snapshot recent enough (nobody reports business latency): configured value.
    NoData,
}

impl SteadySource {
    pub fn label(self) -> &'static str {
        match self {
            Self::Observed => "observed",
            Self::TooFewSamples => "too_few_samples",
            Self::NoData => "no_data",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SteadyP95 {
    pub ms: u64,
    pub source: SteadySource,
    /// Business requests in the window the value was judged on.
    pub samples: u64,
}

/// Snapshots of the business latency histogram over the last window.
#[derive(Debug, Default)]
pub(crate) struct SteadyLatency {
    snapshots: VecDeque<(UnixMillis, LatencyHistogram)>,
}

impl SteadyLatency {
    pub(crate) fn observe(&mut self, now: UnixMillis, histogram: LatencyHistogram, window_ms: u64) {
        if self
            .snapshots
            .back()
            .is_some_and(|(at, last)| *at > now || last.since(&histogram).is_none())
        {
            // Buckets changed (or time went backwards): earlier snapshots are not comparable.
            self.snapshots.clear();
        }
        self.snapshots.push_back((now, histogram));
        // Keep one snapshot at or before the window's start: it is the baseline.
        let start = now.saturating_sub(window_ms);
        while self.snapshots.get(1).is_some_and(|(at, _)| *at <= start) {
            self.snapshots.pop_front();
        }
    }

    /// The steady p95 to judge a wave starting at `now` against.
    pub(crate) fn select(&self, now: UnixMillis, ramp: &WarmupRampConfig) -> SteadyP95 {
        let configured = |source, samples| SteadyP95 {
            ms: ramp.steady_p95_ms,
            source,
            samples,
        };
        let window_ms = secs_to_ms(ramp.steady_window_secs);
        let (Some((first_at, first)), Some((last_at, last))) =
            (self.snapshots.front(), self.snapshots.back())
        else {
            return configured(SteadySource::NoData, 0);
        };
        if now.saturating_sub(*last_at) > window_ms || first_at == last_at {
            return configured(SteadySource::NoData, 0);
        }
        let Some(recent) = last.since(first) else {
            return configured(SteadySource::NoData, 0);
        };
        if recent.count < ramp.steady_min_samples.max(1) {
            return configured(SteadySource::TooFewSamples, recent.count);
        }
        match recent.p95_secs() {
            Some(secs) => SteadyP95 {
                ms: ((secs * 1000.0).round() as u64).max(1),
                source: SteadySource::Observed,
                samples: recent.count,
            },
            None => configured(SteadySource::TooFewSamples, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000;
    const BOUNDS: [f64; 4] = [0.1, 0.5, 1.0, 5.0];

    /// A snapshot with `counts[i]` requests in bucket i (the last entry: above 5 s).
    fn histogram(counts: [u64; 5]) -> LatencyHistogram {
        let mut cumulative = Vec::new();
        let mut total = 0;
        for count in &counts[..4] {
            total += count;
            cumulative.push(total);
        }
        LatencyHistogram {
            upper_bounds_secs: BOUNDS.to_vec(),
            cumulative_counts: cumulative,
            count: total + counts[4],
        }
    }

    fn config() -> WarmupRampConfig {
        WarmupRampConfig {
            steady_p95_ms: 2_000,
            steady_window_secs: 300,
            steady_min_samples: 50,
            ..WarmupRampConfig::default()
        }
    }

    #[test]
    fn nothing_reported_falls_back_to_the_configured_value() {
        let steady = SteadyLatency::default();
        let chosen = steady.select(10 * S, &config());
        assert_eq!((chosen.ms, chosen.source), (2_000, SteadySource::NoData));
    }

    #[test]
    fn busy_window_gives_the_observed_p95_of_recent_traffic_only() {
        let mut steady = SteadyLatency::default();
        let window = 300 * S;
        // Lifetime history: 1,000 slow requests long ago.
        steady.observe(0, histogram([0, 0, 0, 1_000, 0]), window);
        steady.observe(400 * S, histogram([0, 0, 0, 1_000, 0]), window);
        // In the last 5 minutes: 100 requests, 90 under 100 ms and 10 at 0.1–0.5 s.
        steady.observe(700 * S, histogram([90, 10, 0, 1_000, 0]), window);
        let chosen = steady.select(700 * S, &config());
        assert_eq!(chosen.source, SteadySource::Observed);
        assert_eq!(chosen.samples, 100);
        // Rank 95 is the 5th of 10 in (0.1, 0.5]: 0.1 + 0.4 × 5/10 = 0.3 s.
        assert_eq!(chosen.ms, 300);
    }

    #[test]
    fn quiet_window_falls_back_and_a_stale_feed_counts_as_no_data() {
        let mut steady = SteadyLatency::default();
        let window = 300 * S;
        steady.observe(0, histogram([0, 0, 0, 0, 0]), window);
        steady.observe(60 * S, histogram([20, 0, 0, 0, 0]), window);
        let quiet = steady.select(60 * S, &config());
        assert_eq!(
            (quiet.ms, quiet.source, quiet.samples),
            (2_000, SteadySource::TooFewSamples, 20)
        );
        steady.observe(120 * S, histogram([60, 0, 0, 0, 0]), window);
        assert_eq!(
            steady.select(120 * S, &config()).source,
            SteadySource::Observed
        );
        // The feed stops: six minutes later the last snapshot says nothing about now.
        assert_eq!(
            steady.select(481 * S, &config()).source,
            SteadySource::NoData
        );
    }

    #[test]
    fn slow_tail_beyond_the_last_bound_reports_that_bound() {
        let mut steady = SteadyLatency::default();
        steady.observe(0, histogram([0, 0, 0, 0, 0]), 300 * S);
        steady.observe(10 * S, histogram([50, 0, 0, 0, 50]), 300 * S);
        assert_eq!(steady.select(10 * S, &config()).ms, 5_000);
    }

    #[test]
    fn changed_buckets_restart_the_window() {
        let mut steady = SteadyLatency::default();
        steady.observe(0, histogram([0, 0, 0, 0, 0]), 300 * S);
        let mut other = histogram([100, 0, 0, 0, 0]);
        other.upper_bounds_secs[0] = 0.2;
        steady.observe(10 * S, other, 300 * S);
        assert_eq!(
            steady.select(10 * S, &config()).source,
            SteadySource::NoData
        );
    }
}
