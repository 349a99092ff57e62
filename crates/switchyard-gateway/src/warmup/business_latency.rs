//! The business latency a warmup wave is judged against (`warmup.ramp`'s steady p95): the
//! gateway's TTFT histogram with the warmups' own requests taken out, handed to the manager
//! every few seconds. Warmups travel the same front door and land in the same histogram; a
//! wave of cold-start warmups left in it would raise the very bar it is measured against.

use parking_lot::Mutex;
use prometheus::HistogramVec;
use prometheus::core::Collector;
use std::sync::Arc;
use std::time::Duration;
use switchyard_warmup::{LatencyHistogram, WarmupManager};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;

/// How often the manager gets a fresh snapshot (its window is minutes long).
const FEED_EVERY: Duration = Duration::from_secs(5);
/// Warmup samples held between feeds at most; far above any warmup rate.
const MAX_PENDING: usize = 100_000;

/// TTFTs of warmup requests, as the gateway's histogram saw them (same start, first body
/// frame), waiting to be subtracted.
#[derive(Default)]
pub(crate) struct WarmupTtfts {
    pending: Mutex<Vec<f64>>,
}

impl WarmupTtfts {
    pub(crate) fn record(&self, ttft: Duration) {
        let mut pending = self.pending.lock();
        if pending.len() < MAX_PENDING {
            pending.push(ttft.as_secs_f64());
        }
    }

    fn drain(&self) -> Vec<f64> {
        std::mem::take(&mut *self.pending.lock())
    }
}

/// Cumulative warmup counts in the gateway's buckets.
#[derive(Debug, Default)]
pub(crate) struct Subtraction {
    warmups: LatencyHistogram,
    pending: Vec<f64>,
}

impl Subtraction {
    /// `gateway` minus every warmup recorded so far. Warmup samples are drained before the
    /// gateway is read, so each was already counted there.
    pub(crate) fn business(
        &mut self,
        drained: Vec<f64>,
        gateway: LatencyHistogram,
    ) -> LatencyHistogram {
        self.pending.extend(drained);
        if self.warmups.upper_bounds_secs != gateway.upper_bounds_secs {
            self.warmups = LatencyHistogram {
                cumulative_counts: vec![0; gateway.upper_bounds_secs.len()],
                upper_bounds_secs: gateway.upper_bounds_secs.clone(),
                count: 0,
            };
        }
        let warmups = &mut self.warmups;
        for secs in self.pending.drain(..) {
            for (bound, count) in warmups
                .upper_bounds_secs
                .iter()
                .zip(warmups.cumulative_counts.iter_mut())
            {
                if secs <= *bound {
                    *count += 1;
                }
            }
            warmups.count += 1;
        }
        LatencyHistogram {
            cumulative_counts: gateway
                .cumulative_counts
                .iter()
                .zip(&warmups.cumulative_counts)
                .map(|(all, warm)| all.saturating_sub(*warm))
                .collect(),
            count: gateway.count.saturating_sub(warmups.count),
            upper_bounds_secs: gateway.upper_bounds_secs,
        }
    }
}

/// The histogram summed over its label sets (routes); None before any request.
pub(crate) fn summed(histograms: &HistogramVec) -> Option<LatencyHistogram> {
    let mut total: Option<LatencyHistogram> = None;
    for family in histograms.collect() {
        for metric in family.get_metric() {
            let histogram = metric.get_histogram();
            let buckets = histogram.get_bucket();
            let sum = total.get_or_insert_with(|| LatencyHistogram {
                upper_bounds_secs: buckets.iter().map(|b| b.upper_bound()).collect(),
                cumulative_counts: vec![0; buckets.len()],
                count: 0,
            });
            for (into, bucket) in sum.cumulative_counts.iter_mut().zip(buckets) {
                *into += bucket.cumulative_count();
            }
            sum.count += histogram.get_sample_count();
        }
    }
    total
}

/// Runs until aborted by `WarmupTasks::stop`.
pub(super) fn spawn(
    metrics: Arc<Metrics>,
    warmup_ttfts: Arc<WarmupTtfts>,
    manager: WarmupManager,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(FEED_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut subtraction = Subtraction::default();
        loop {
            ticker.tick().await;
            let drained = warmup_ttfts.drain();
            let Some(gateway) = summed(&metrics.ttft) else {
                subtraction.pending.extend(drained);
                continue;
            };
            let business = subtraction.business(drained, gateway);
            manager.observe_business_latency(business);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::HistogramOpts;

    #[test]
    fn warmups_are_taken_out_of_the_gateway_histogram() {
        let ttft = HistogramVec::new(
            HistogramOpts::new("t_seconds", "t").buckets(vec![0.1, 1.0, 5.0]),
            &["route"],
        )
        .unwrap();
        assert_eq!(summed(&ttft), None);
        for secs in [0.05, 0.05, 0.5] {
            ttft.with_label_values(&["chat"]).observe(secs);
        }
        ttft.with_label_values(&["completions"]).observe(0.05);
        // Two warmups paid a 3 s cold start; the gateway saw them too.
        ttft.with_label_values(&["chat"]).observe(3.0);
        ttft.with_label_values(&["chat"]).observe(3.0);
        let gateway = summed(&ttft).unwrap();
        assert_eq!(gateway.cumulative_counts, vec![3, 4, 6]);
        assert_eq!(gateway.count, 6);

        let mut subtraction = Subtraction::default();
        let business = subtraction.business(vec![3.0, 3.0], gateway.clone());
        assert_eq!(business.cumulative_counts, vec![3, 4, 4]);
        assert_eq!(business.count, 4);
        // Cumulative: the same warmups are not subtracted twice.
        let again = subtraction.business(Vec::new(), gateway);
        assert_eq!(again, business);
    }
}
