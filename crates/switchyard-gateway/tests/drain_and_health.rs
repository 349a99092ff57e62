#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Worker health through the gateway: drain before remove with a stream in flight, failed
//! workers leaving routing, latency-overloaded workers filtered and probed back, and the
//! `latency_aware.active` switch at run time.

mod common;

use common::*;
use http::Method;
use http_body_util::BodyExt;
use std::time::Duration;
use switchyard_gateway::{Config, GatewayHandle};
use switchyard_sim::{Fault, SimWorker};

/// Fast health settings so socket tests finish in well under a second per transition.
fn fast_health(config: &mut Config) {
    let health = &mut config.health;
    health.health.interval_ms = 50;
    // Generous: a loaded CI machine must not fail a healthy worker by a slow answer.
    health.health.timeout_ms = 2000;
    health.health.suspect_interval_ms = 20;
    health.latency_aware.scrape_interval_ms = 100;
    health.latency_aware.min_samples = 3;
    health.latency_aware.overload_ttft_p90_ms = 400;
    health.latency_aware.recover_ttft_p90_ms = 200;
    health.latency_aware.overload_tpot_p90_ms = 50;
    health.latency_aware.recover_tpot_p90_ms = 20;
    health.prober.interval_ms = 50;
    health.prober.latency_bound_ms = 500;
}

/// A round-robin gateway in front of `sims` with [`fast_health`], then `tune`.
async fn fast_health_gateway(sims: &[SimWorker], tune: impl FnOnce(&mut Config)) -> GatewayHandle {
    let mut config = config_for(sims, "round_robin");
    fast_health(&mut config);
    tune(&mut config);
    switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap()
}

async fn admin_workers(base: &str) -> serde_json::Value {
    send(
        Method::GET,
        &format!("{base}/admin/workers"),
        &[("authorization", &format!("Bearer {ADMIN_KEY}"))],
        "",
    )
    .await
    .json()
}

async fn worker_field(base: &str, name: &str, field: &str) -> serde_json::Value {
    let all = admin_workers(base).await;
    all["workers"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == name))
        .map(|w| w[field].clone())
        .unwrap_or(serde_json::Value::Null)
}

#[tokio::test]
async fn drain_lets_an_in_flight_stream_finish_and_takes_no_new_requests() {
    let sims = start_sims(2).await;
    let gateway = fast_health_gateway(&sims, |_| {}).await;
    let base = gateway.base_url();

    // A long stream on sim-0 (round robin starts there).
    let mut long = chat("sim-llama", "a long story", true);
    long["max_tokens"] = 200.into();
    let response = open_chat(&base, &long).await;
    assert_eq!(response.headers()["x-switchyard-worker"], "sim-0");
    let reply = send(
        Method::DELETE,
        &format!("{base}/admin/workers/sim-0"),
        &[("authorization", &format!("Bearer {ADMIN_KEY}"))],
        "",
    )
    .await;
    assert_eq!(reply.status, 202);
    assert_eq!(worker_field(&base, "sim-0", "draining").await, true);

    let before = sims[0].stats().requests_received;
    for _ in 0..4 {
        let reply = post_json(
            &format!("{base}/v1/chat/completions"),
            &chat("sim-llama", "hi", false),
        )
        .await;
        assert_eq!(reply.header("x-switchyard-worker"), Some("sim-1"));
    }
    assert_eq!(
        sims[0].stats().requests_received,
        before,
        "draining takes nothing new"
    );

    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.trim_end().ends_with("data: [DONE]"),
        "the stream finished cleanly"
    );
    assert_eq!(sims[0].stats().requests_cancelled, 0);
    let gone = eventually(Duration::from_secs(5), || async {
        worker_field(&base, "sim-0", "name").await.is_null()
    })
    .await;
    assert!(gone, "drained worker left the registry");
}

#[tokio::test]
async fn a_failing_worker_leaves_routing_and_comes_back() {
    let sims = start_sims(2).await;
    let gateway = fast_health_gateway(&sims, |_| {}).await;
    let base = gateway.base_url();
    sims[0].set_fault(Fault::Error);
    let out = eventually(Duration::from_secs(5), || async {
        worker_field(&base, "sim-0", "routability").await == "unhealthy"
    })
    .await;
    assert!(out, "{}", admin_workers(&base).await);
    let before = sims[0].stats().requests_received;
    for _ in 0..6 {
        let reply = post_json(
            &format!("{base}/v1/chat/completions"),
            &chat("sim-llama", "hi", false),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.header("x-switchyard-worker"), Some("sim-1"));
    }
    assert_eq!(sims[0].stats().requests_received, before);
    sims[0].set_fault(Fault::Ok);
    let back = eventually(Duration::from_secs(5), || async {
        worker_field(&base, "sim-0", "routability").await == "routable"
    })
    .await;
    assert!(back, "{}", admin_workers(&base).await);
}

#[tokio::test]
async fn a_slow_worker_is_marked_filtered_and_probed_back_and_active_false_clears_marks() {
    // Real-time sims (5 ms per token): slowed x20 a token takes 100 ms, above the 50 ms
    // TPOT threshold, while normal decoding stays under the 20 ms recovery line.
    let sims = start_sims_scaled(2, 1.0).await;
    let gateway = fast_health_gateway(&sims, |_| {}).await;
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");
    sims[0].set_fault(Fault::Slow { factor: 20.0 });
    // Traffic gives the worker's /metrics histograms samples to judge.
    let marked = eventually(Duration::from_secs(10), || async {
        let _ = post_json(&url, &chat("sim-llama", "some words to prefill here", true)).await;
        worker_field(&base, "sim-0", "overloaded").await == true
    })
    .await;
    assert!(marked, "{}", admin_workers(&base).await);
    assert_eq!(
        worker_field(&base, "sim-0", "routability").await,
        "overloaded"
    );
    for _ in 0..4 {
        let reply = post_json(&url, &chat("sim-llama", "hi", false)).await;
        assert_eq!(reply.header("x-switchyard-worker"), Some("sim-1"));
    }

    // Switching latency awareness off clears the mark at once; raw figures keep flowing.
    let change =
        serde_json::json!({"set": {"health.latency_aware.active": false}, "reason": "test"});
    let reply = admin_call(&base, ADMIN_KEY, Method::PUT, "/admin/config", change).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let cleared = eventually(Duration::from_secs(5), || async {
        worker_field(&base, "sim-0", "routability").await == "routable"
    })
    .await;
    assert!(cleared, "{}", admin_workers(&base).await);
    let change = serde_json::json!({"set": {"health.latency_aware.active": true}});
    let reply = admin_call(&base, ADMIN_KEY, Method::PUT, "/admin/config", change).await;
    assert_eq!(reply.status, 200);

    // Back to normal speed: the prober confirms recovery and the mark clears.
    sims[0].set_fault(Fault::Ok);
    let recovered = eventually(Duration::from_secs(15), || async {
        let _ = post_json(&url, &chat("sim-llama", "hi", true)).await;
        worker_field(&base, "sim-0", "overloaded").await == false
    })
    .await;
    assert!(recovered, "{}", admin_workers(&base).await);
    let metrics = metrics_text(&base).await;
    assert!(
        metrics.contains("switchyard_worker_ttft_p90_seconds"),
        "raw figures exported"
    );
    assert!(metrics.contains("switchyard_prefilter_workers_filtered_total{reason=\"overloaded\"}"));
}

#[tokio::test]
async fn a_worker_back_from_an_outage_is_not_held_out_for_the_rest_of_its_breaker_period() {
    let sims = start_sims(2).await;
    // Health needs 20 failed checks (about a second) to take the worker out, so traffic
    // opens its breaker first; the breaker would then stay open a whole minute.
    let gateway = fast_health_gateway(&sims, |config| {
        config.health.health.unhealthy_threshold = 20;
        config.health.health.suspect_interval_ms = 50;
        config.health.health.healthy_threshold = 3;
        config.health.breaker.minimum_calls = 4;
        config.health.breaker.open_ms = 60_000;
    })
    .await;
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");
    sims[0].set_fault(Fault::Error);
    for _ in 0..12 {
        post_json(&url, &chat("sim-llama", "hi", false)).await;
        if worker_field(&base, "sim-0", "breaker").await == "open" {
            break;
        }
    }
    assert_eq!(
        worker_field(&base, "sim-0", "breaker").await,
        "open",
        "{}",
        admin_workers(&base).await
    );
    let out = eventually(Duration::from_secs(5), || async {
        worker_field(&base, "sim-0", "healthy").await == false
    })
    .await;
    assert!(out, "{}", admin_workers(&base).await);
    sims[0].set_fault(Fault::Ok);
    let back = eventually(Duration::from_secs(5), || async {
        worker_field(&base, "sim-0", "routability").await == "routable"
    })
    .await;
    assert!(
        back,
        "routable again within 5 s of recovering, not after the 60 s open period: {}",
        admin_workers(&base).await
    );
    assert_eq!(worker_field(&base, "sim-0", "breaker").await, "half_open");
    let before = sims[0].stats().requests_received;
    for _ in 0..12 {
        let reply = post_json(&url, &chat("sim-llama", "hi", false)).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    assert!(
        sims[0].stats().requests_received > before,
        "sim-0 serves again"
    );
    assert_eq!(worker_field(&base, "sim-0", "breaker").await, "closed");
}
