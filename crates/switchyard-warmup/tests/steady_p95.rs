//! The ramp's steady p95 comes from business latency the owner reports (a rolling window of
//! its histogram), and falls back to the configured value when traffic is too thin.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::ManualClock;
use switchyard_warmup::{
    LatencyHistogram, RampMove, SteadySource, Tier, WarmupError, WarmupExecutor, WarmupManager,
    WarmupOutcome, WarmupResource,
};
use tokio::sync::Semaphore;

/// Each warmup waits for a permit, then "takes" `latency` on the manual clock.
struct TimedExecutor {
    clock: ManualClock,
    latency: Duration,
    gate: Arc<Semaphore>,
}

impl WarmupExecutor for TimedExecutor {
    async fn warm(&self, _: &WarmupResource) -> Result<WarmupOutcome, WarmupError> {
        self.gate.acquire().await.unwrap().forget();
        self.clock.advance(self.latency);
        Ok(WarmupOutcome {
            landed_on: Some("w1".into()),
            business_reachable: vec!["w1".into()],
            tokens_spent: 10,
        })
    }
}

/// `fast` requests under 100 ms and `slow` ones in (0.1 s, 0.5 s], cumulative.
fn business(fast: u64, slow: u64) -> LatencyHistogram {
    LatencyHistogram {
        upper_bounds_secs: vec![0.1, 0.5, 1.0, 5.0],
        cumulative_counts: vec![fast, fast + slow, fast + slow, fast + slow],
        count: fast + slow,
    }
}

async fn wait_warmed(manager: &WarmupManager, count: u64) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while manager.report().wave.map(|wave| wave.warmed) != Some(count) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .expect("warmups did not finish in time");
}

/// Business traffic `(fast, slow)` over the minute before a wave of 700 ms warmups; returns
/// how the first 30 s window was judged and the wave's steady p95.
async fn first_window(fast: u64, slow: u64) -> (RampMove, u64, SteadySource, prometheus::Registry) {
    let (clock, wall) = manual_wall(0);
    let gate = Arc::new(Semaphore::new(0));
    let executor = Arc::new(TimedExecutor {
        clock: clock.clone(),
        latency: Duration::from_millis(700),
        gate: gate.clone(),
    });
    let mut config = config(
        (0..10)
            .map(|i| instance(&format!("r{i}"), Tier::L0))
            .collect(),
    );
    config.ramp.target_concurrency = 20; // 5 %: one at a time
    config.ramp.steady_p95_ms = 2_000;
    config.ramp.steady_min_samples = 50;
    let registry = prometheus::Registry::new();
    let options = switchyard_warmup::WarmupOptions {
        clock: wall,
        ..Default::default()
    };
    let (manager, _join) = WarmupManager::start(config, executor, options, &registry)
        .await
        .unwrap();

    manager.observe_business_latency(business(0, 0));
    clock.advance(Duration::from_secs(60));
    manager.observe_business_latency(business(fast, slow));
    let started = manager.tick().await.unwrap();
    assert_eq!(started.started.len(), 1);
    let steady = manager.report().wave.unwrap().steady_p95;

    gate.add_permits(2);
    wait_warmed(&manager, 2).await;
    clock.advance(Duration::from_secs(30));
    let judged = manager.tick().await.unwrap().ramp.unwrap();
    manager.stop();
    (judged, steady.ms, steady.source, registry)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_business_traffic_sets_the_bar_and_slow_warmups_hold() {
    // 100 requests, p95 inside (0.1, 0.5]: 0.1 + 0.4 × 5/10 = 300 ms. Warmups at 700 ms
    // are above 2 × 300 ms: the wave holds its first step.
    let (judged, steady_ms, source, registry) = first_window(90, 10).await;
    assert_eq!((steady_ms, source), (300, SteadySource::Observed));
    assert_eq!(judged, RampMove::Hold);
    let observed = [("source", "observed")];
    let selections = "switchyard_warmup_steady_p95_selections_total";
    assert_eq!(metric(&registry, selections, &observed), 1.0);
    assert_eq!(
        metric(&registry, "switchyard_warmup_steady_p95_seconds", &[]),
        0.3
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thin_traffic_falls_back_to_the_configured_steady_p95() {
    // 20 requests < 50 samples: the configured 2 s stands, and 700 ms warmups advance.
    let (judged, steady_ms, source, registry) = first_window(18, 2).await;
    assert_eq!((steady_ms, source), (2_000, SteadySource::TooFewSamples));
    assert_eq!(judged, RampMove::Advance { to: 1 });
    let too_few = [("source", "too_few_samples")];
    let selections = "switchyard_warmup_steady_p95_selections_total";
    assert_eq!(metric(&registry, selections, &too_few), 1.0);
}
