//! Summary figures shared by the whole-run report and its per-slice breakdowns.

use serde::Serialize;

use crate::stats::percentile_nearest_rank;

/// Latency percentiles in seconds (nearest rank over the full sample); `None` without samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub samples: usize,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
    /// The slowest sample.
    pub max: Option<f64>,
}

impl LatencySummary {
    pub(crate) fn from_sample(mut sample: Vec<f64>) -> Self {
        sample.sort_by(f64::total_cmp);
        Self {
            samples: sample.len(),
            p50: percentile_nearest_rank(&sample, 50.0),
            p90: percentile_nearest_rank(&sample, 90.0),
            p99: percentile_nearest_rank(&sample, 99.0),
            max: sample.last().copied(),
        }
    }
}

/// Successful requests served by one worker.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerLoad {
    pub requests: u64,
    /// Fraction of all successful requests, 0..=1.
    pub share: f64,
}
