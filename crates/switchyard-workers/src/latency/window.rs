//! Turns successive cumulative snapshots into per-window p90 figures.

use serde::Serialize;
use std::time::{Duration, Instant};

use super::histogram::{HistogramFamily, quantile, sample_count, window_delta};

/// Where a worker's latency figures came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencySource {
    /// The worker's own Prometheus histograms (vLLM / SGLang names).
    Metrics,
    /// What the gateway measured on the worker's responses (no usable `/metrics`).
    GatewayObserved,
}

impl LatencySource {
    pub fn as_str(self) -> &'static str {
        match self {
            LatencySource::Metrics => "metrics",
            LatencySource::GatewayObserved => "gateway_observed",
        }
    }
}

/// One window's raw figures, published whatever the judge makes of them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LatencyFigures {
    pub source: LatencySource,
    pub ttft_p90_seconds: Option<f64>,
    pub tpot_p90_seconds: Option<f64>,
    pub ttft_samples: u64,
    pub tpot_samples: u64,
    pub window_seconds: f64,
}

/// A cumulative reading of both histograms from one source.
#[derive(Clone, Debug)]
pub(crate) struct Reading {
    pub(crate) source: LatencySource,
    pub(crate) ttft: HistogramFamily,
    pub(crate) tpot: HistogramFamily,
}

/// The collector's memory: the reading the current window started from.
#[derive(Debug, Default)]
pub(crate) struct WindowTracker {
    baseline: Option<(Instant, Reading)>,
}

impl WindowTracker {
    /// Figures for the window since the baseline. The baseline moves forward once the window
    /// holds `min_samples` TTFT samples or reaches `max_window`; until then a sparse window
    /// keeps growing. The first reading, and a change of source, only set the baseline.
    pub(crate) fn observe(
        &mut self,
        now: Instant,
        reading: Reading,
        min_samples: u64,
        max_window: Duration,
    ) -> Option<LatencyFigures> {
        let Some((since, base)) = &self.baseline else {
            self.baseline = Some((now, reading));
            return None;
        };
        if base.source != reading.source {
            self.baseline = Some((now, reading));
            return None;
        }
        let window = now.saturating_duration_since(*since);
        let ttft = window_delta(&base.ttft, &reading.ttft);
        let tpot = window_delta(&base.tpot, &reading.tpot);
        let figures = LatencyFigures {
            source: reading.source,
            ttft_p90_seconds: quantile(0.9, &ttft),
            tpot_p90_seconds: quantile(0.9, &tpot),
            ttft_samples: sample_count(&ttft),
            tpot_samples: sample_count(&tpot),
            window_seconds: window.as_secs_f64(),
        };
        if figures.ttft_samples >= min_samples || window >= max_window {
            self.baseline = Some((now, reading));
        }
        Some(figures)
    }
}

#[cfg(test)]
mod tests {
    use super::super::histogram::Series;
    use super::*;

    fn reading(source: LatencySource, fast: f64, slow: f64) -> Reading {
        let mut ttft = HistogramFamily::default();
        ttft.series.insert(
            String::new(),
            Series {
                buckets: vec![
                    (1.0, fast),
                    (60.0, fast + slow),
                    (f64::INFINITY, fast + slow),
                ],
                count: None,
            },
        );
        Reading {
            source,
            ttft,
            tpot: HistogramFamily::default(),
        }
    }

    #[test]
    fn first_reading_sets_the_baseline_then_windows_follow() {
        let mut tracker = WindowTracker::default();
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        let m = LatencySource::Metrics;
        assert!(
            tracker
                .observe(t0, reading(m, 100.0, 0.0), 10, max)
                .is_none()
        );
        let f = tracker
            .observe(
                t0 + Duration::from_secs(5),
                reading(m, 100.0, 20.0),
                10,
                max,
            )
            .unwrap();
        assert_eq!(f.ttft_samples, 20);
        assert!(f.ttft_p90_seconds.unwrap() > 50.0);
        assert_eq!(f.tpot_p90_seconds, None);
        assert_eq!(f.window_seconds, 5.0);
        // Enough samples: the next window starts from the last reading.
        let f = tracker
            .observe(
                t0 + Duration::from_secs(10),
                reading(m, 115.0, 20.0),
                10,
                max,
            )
            .unwrap();
        assert_eq!(f.ttft_samples, 15);
        assert!(f.ttft_p90_seconds.unwrap() <= 1.0);
    }

    #[test]
    fn sparse_windows_grow_until_enough_samples_or_max_age() {
        let mut tracker = WindowTracker::default();
        let t0 = Instant::now();
        let max = Duration::from_secs(12);
        let m = LatencySource::Metrics;
        let s = Duration::from_secs;
        tracker.observe(t0, reading(m, 0.0, 0.0), 10, max);
        let f = tracker
            .observe(t0 + s(5), reading(m, 4.0, 0.0), 10, max)
            .unwrap();
        assert_eq!((f.ttft_samples, f.window_seconds), (4, 5.0));
        let f = tracker
            .observe(t0 + s(10), reading(m, 8.0, 0.0), 10, max)
            .unwrap();
        assert_eq!((f.ttft_samples, f.window_seconds), (8, 10.0));
        // Still sparse at 15 s, but the window hit max age: baseline moves.
        let f = tracker
            .observe(t0 + s(15), reading(m, 9.0, 0.0), 10, max)
            .unwrap();
        assert_eq!((f.ttft_samples, f.window_seconds), (9, 15.0));
        let f = tracker
            .observe(t0 + s(20), reading(m, 10.0, 0.0), 10, max)
            .unwrap();
        assert_eq!((f.ttft_samples, f.window_seconds), (1, 5.0));
    }

    #[test]
    fn a_source_change_restarts_the_window() {
        let mut tracker = WindowTracker::default();
        let t0 = Instant::now();
        let max = Duration::from_secs(60);
        let s = Duration::from_secs;
        tracker.observe(t0, reading(LatencySource::Metrics, 50.0, 0.0), 1, max);
        let switched = reading(LatencySource::GatewayObserved, 3.0, 0.0);
        assert!(tracker.observe(t0 + s(5), switched, 1, max).is_none());
        let f = tracker
            .observe(
                t0 + s(10),
                reading(LatencySource::GatewayObserved, 5.0, 0.0),
                1,
                max,
            )
            .unwrap();
        assert_eq!(f.source, LatencySource::GatewayObserved);
        assert_eq!(f.ttft_samples, 2);
    }
}
