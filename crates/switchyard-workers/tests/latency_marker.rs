#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The latency-aware overload marker over real sockets: collector, judge, prober, hot reload.

mod common;

use common::raw_server::RawServer;
use common::{Fixture, Load, eventually, fast_config, holds, sim};
use std::sync::Arc;
use std::time::Duration;
use switchyard_sim::Fault;
use switchyard_workers::{LatencySource, Routability, WorkerHandle};

const LIMIT: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowed_worker_is_marked_overloaded_then_probed_back_in() {
    let fx = Fixture::start(fast_config()).await;
    let worker = sim("sim-a").await;
    let w = fx.add("a", &worker.base_url()).await;
    let _load = Load::start(&fx.client, &worker.base_url(), 4);
    eventually("a full window", LIMIT, || {
        w.latency().is_some_and(|l| l.ttft_samples >= 3)
    })
    .await;
    assert_eq!(w.latency().unwrap().source, LatencySource::Metrics);
    holds(
        "fast worker stays unmarked",
        Duration::from_millis(500),
        || w.routability() == Routability::Routable,
    )
    .await;

    worker.set_fault(Fault::Slow { factor: 20.0 });
    let marked = eventually("overloaded", LIMIT, || {
        w.routability() == Routability::Overloaded
    })
    .await;
    let p90 = w.latency().unwrap().ttft_p90_seconds.unwrap();
    assert!(p90 >= 0.2, "marked with TTFT p90 {p90}");
    // Health checks still pass: overloaded and unhealthy are different conditions.
    assert!(w.is_healthy());

    worker.set_fault(Fault::Ok);
    let back = eventually("recovered", LIMIT, || {
        w.routability() == Routability::Routable
    })
    .await;
    let status = w.status();
    assert!(status.counters.probe_successes >= 3);
    assert_eq!(status.last_transition, Some("recovered"));
    let text = fx.metrics_text();
    assert!(
        text.contains(
            r#"switchyard_worker_transitions_total{reason="overloaded_ttft",worker="a"} 1"#
        )
    );
    assert!(
        text.contains(r#"switchyard_worker_transitions_total{reason="recovered",worker="a"} 1"#)
    );
    assert!(text.contains(r#"switchyard_worker_ttft_p90_seconds{source="metrics",worker="a"}"#));
    assert!(text.contains(r#"switchyard_worker_state{state="overloaded",worker="a"} 0"#));
    eprintln!(
        "latency path (scrape 100 ms, probe 50 ms, min 3 samples): Slow{{20}}->out {marked:?}, Ok->back {back:?}"
    );
}

/// A worker without `/metrics`, after its collector has published a first (empty) window.
async fn bare_worker(fx: &Fixture) -> (RawServer, Arc<WorkerHandle>) {
    let server = RawServer::start().await;
    let w = fx.add("raw", &server.url).await;
    eventually("models and a first window", LIMIT, || {
        w.models().is_some() && w.latency().is_some()
    })
    .await;
    (server, w)
}

fn observe(w: &WorkerHandle, n: usize, ttft_ms: u64, tpot_ms: u64) {
    for _ in 0..n {
        w.observe_latency(
            Duration::from_millis(ttft_ms),
            Some(Duration::from_millis(tpot_ms)),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_metrics_the_gateway_observations_drive_the_judge_and_probes_are_tagged() {
    let fx = Fixture::start(fast_config()).await;
    let (server, w) = bare_worker(&fx).await;
    assert_eq!(w.latency().unwrap().source, LatencySource::GatewayObserved);

    observe(&w, 5, 500, 10);
    eventually("overloaded", LIMIT, || w.is_overloaded()).await;
    eventually("three probes", LIMIT, || server.probes().len() >= 3).await;
    let probe = server.probes()[0].clone();
    assert_eq!(probe.path, "/v1/completions");
    assert_eq!(probe.header("x-switchyard-purpose"), Some("probe"));
    let body: serde_json::Value = serde_json::from_str(&probe.body).unwrap();
    // Shaped like traffic: a real prompt, several tokens, streamed so TPOT can be timed.
    let prober = switchyard_workers::HealthConfig::default().prober;
    assert_eq!(body["max_tokens"], prober.max_tokens);
    assert_eq!(body["stream"], true);
    assert_eq!(body["model"], "raw-model");
    assert_eq!(body["prompt"], prober.prompt.as_str());
    // Probes succeed, but latency has not confirmed: still locked out.
    holds(
        "locked without good latency",
        Duration::from_millis(300),
        || w.is_overloaded(),
    )
    .await;

    observe(&w, 5, 5, 2);
    eventually("recovered", LIMIT, || !w.is_overloaded()).await;
    // The prober stops with the mark (at most one probe was already on its way).
    let probes = server.probes().len();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(server.probes().len() <= probes + 1);
    // Probes never count as user traffic: the breaker saw nothing.
    let text = fx.metrics_text();
    assert!(
        text.contains(r#"switchyard_worker_breaker_calls_total{outcome="success",worker="raw"} 0"#)
    );
    assert!(text.contains(
        r#"switchyard_worker_latency_scrapes_total{result="gateway_observed",worker="raw"}"#
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hot_reload_changes_intervals_and_thresholds_without_restart() {
    let mut config = fast_config();
    config.health.interval_ms = 400;
    config.health.suspect_interval_ms = 400;
    config.latency_aware.overload_ttft_p90_ms = 30_000;
    config.latency_aware.recover_ttft_p90_ms = 16_000;
    let fx = Fixture::start(config.clone()).await;
    let (_server, w) = bare_worker(&fx).await;
    let checks = || w.status().counters.health_check_successes;

    let before = checks();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let slow_rate = checks() - before;

    // Slow answers under the default thresholds: judged normal.
    observe(&w, 5, 500, 10);
    eventually("a normal verdict", LIMIT, || {
        fx.metrics_text()
            .contains(r#"switchyard_worker_judge_windows_total{verdict="normal",worker="raw"} 1"#)
    })
    .await;
    assert!(!w.is_overloaded());

    config.health.interval_ms = 20;
    config.health.suspect_interval_ms = 20;
    config.latency_aware.overload_ttft_p90_ms = 200;
    config.latency_aware.recover_ttft_p90_ms = 100;
    fx.registry.update_health_config(config.clone()).unwrap();
    assert_eq!(fx.registry.health_config().health.interval_ms, 20);
    // The old timer fires once more (<= 400 ms), then the new cadence applies.
    tokio::time::sleep(Duration::from_millis(450)).await;
    let before = checks();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let fast_rate = checks() - before;
    assert!(
        slow_rate <= 2 && fast_rate >= 8,
        "checks per 400 ms: {slow_rate} -> {fast_rate}"
    );

    observe(&w, 5, 500, 10);
    eventually("overloaded under the new threshold", LIMIT, || {
        w.is_overloaded()
    })
    .await;

    let mut bad = config.clone();
    bad.latency_aware.recover_ttft_p90_ms = 300;
    let err = fx.registry.update_health_config(bad).unwrap_err();
    assert!(
        err.to_string()
            .contains("latency_aware.recover_ttft_p90_ms"),
        "{err}"
    );
    assert_eq!(
        *fx.registry.health_config(),
        config,
        "rejected config not applied"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn switching_latency_aware_off_clears_marks_at_once_and_figures_keep_flowing() {
    let config = fast_config();
    let fx = Fixture::start(config.clone()).await;
    let (server, w) = bare_worker(&fx).await;
    observe(&w, 5, 500, 10);
    eventually("overloaded", LIMIT, || {
        w.routability() == Routability::Overloaded
    })
    .await;

    let mut off = config.clone();
    off.latency_aware.active = false;
    fx.registry.update_health_config(off).unwrap();
    assert_eq!(
        w.routability(),
        Routability::Routable,
        "no filtering from the swap on"
    );
    eventually("mark cleared", LIMIT, || !w.is_overloaded()).await;
    assert_eq!(w.status().last_transition, Some("cleared_inactive"));

    // Raw figures still flow, but nothing is marked and no probes are sent.
    let probes = server.probes().len();
    observe(&w, 7, 900, 10);
    eventually("the slow window published", LIMIT, || {
        w.latency().is_some_and(|l| l.ttft_samples == 7)
    })
    .await;
    assert!(w.latency().unwrap().ttft_p90_seconds.unwrap() > 0.5);
    holds("no mark while inactive", Duration::from_millis(300), || {
        !w.is_overloaded()
    })
    .await;
    assert!(server.probes().len() <= probes + 1);

    fx.registry.update_health_config(config).unwrap();
    observe(&w, 5, 500, 10);
    eventually("marked again once active", LIMIT, || w.is_overloaded()).await;
}
