#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Demand above capacity with healthy workers, through the real gateway and simulated
//! workers over loopback: the excess is shed with `Retry-After`, the recovery ramp is not
//! engaged (capacity stays whole) and P0 is served.

mod common;

use common::*;
use http::Method;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use switchyard_gateway::GatewayHandle;
use switchyard_gateway::config::AdmissionConfig;
use switchyard_sim::SimWorker;

const P0_KEY: &str = "sk-urgent";
const P2_KEY: &str = "sk-batch";

fn admission() -> AdmissionConfig {
    serde_json::from_value(serde_json::json!({
        "max_concurrent": 2,
        // Quick to react, so the old behaviour (queue refusals entering overload) would
        // show within the test's few seconds.
        "detector": {"window_ms": 2000, "min_samples": 10, "enter_hold_ms": 300},
        "tenants": [
            {"api_key": P0_KEY, "caller": "urgent", "max_priority": "P0"},
            {"api_key": P2_KEY, "caller": "batch", "max_priority": "P2"},
        ],
    }))
    .unwrap()
}

/// Two sims at half the default pace behind a least-load gateway admitting by `admission`,
/// and the gateway's chat URL.
async fn two_slow_sims_behind(
    admission: AdmissionConfig,
) -> (Vec<SimWorker>, GatewayHandle, String) {
    let sims = start_sims_scaled(2, 2.0).await;
    let mut config = config_for(&sims, "least_load");
    config.admission = admission;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    (sims, gateway, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demand_overload_with_healthy_workers_sheds_without_the_ramp_and_serves_p0() {
    let (_sims, gateway, url) = two_slow_sims_behind(admission()).await;
    let body = chat("sim-llama", "hello there", false).to_string();

    // 48 batch clients that retry at once, ignoring Retry-After: far more than 2 slots and
    // than the P2 queue can hold within its 1 s wait limit.
    let stop = Arc::new(AtomicBool::new(false));
    let mut flood = Vec::new();
    for _ in 0..48 {
        let (url, body, stop) = (url.clone(), body.clone(), stop.clone());
        flood.push(tokio::spawn(async move {
            let mut refusals = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let auth = format!("Bearer {P2_KEY}");
                let reply = send(
                    Method::POST,
                    &url,
                    &[("authorization", &auth)],
                    body.clone(),
                )
                .await;
                if reply.status != 200 {
                    refusals.push((
                        reply.status.as_u16(),
                        reply.header("retry-after").map(str::to_owned),
                        reply.header("retry-after-ms").map(str::to_owned),
                    ));
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            refusals
        }));
    }
    // One urgent client, one request at a time: within P0's guaranteed slot.
    let mut p0_statuses = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while tokio::time::Instant::now() < deadline {
        let auth = format!("Bearer {P0_KEY}");
        let reply = send(
            Method::POST,
            &url,
            &[("authorization", &auth)],
            body.clone(),
        )
        .await;
        p0_statuses.push(reply.status.as_u16());
    }
    let snapshot = admin_call(
        &gateway.base_url(),
        ADMIN_KEY,
        Method::GET,
        "/admin/admission",
        serde_json::Value::Null,
    )
    .await
    .json();
    stop.store(true, Ordering::Relaxed);
    let mut refusals = Vec::new();
    for task in flood {
        refusals.extend(task.await.unwrap());
    }

    assert!(
        refusals.len() > 20,
        "the flood was shed: {}",
        refusals.len()
    );
    for (status, retry_after, retry_after_ms) in &refusals {
        assert_eq!(*status, 503);
        let secs: u64 = retry_after
            .as_deref()
            .expect("Retry-After")
            .parse()
            .unwrap();
        let millis: u64 = retry_after_ms
            .as_deref()
            .expect("retry-after-ms")
            .parse()
            .unwrap();
        assert!(secs >= 1 && millis >= 1);
        assert_eq!(secs, millis.div_ceil(1000).max(1), "the two headers agree");
    }
    assert!(p0_statuses.len() >= 5, "{p0_statuses:?}");
    assert!(
        p0_statuses.iter().all(|s| *s == 200),
        "P0 always served: {p0_statuses:?}"
    );
    assert_eq!(snapshot["state"], "normal", "{snapshot}");
    assert_eq!(snapshot["dispatch_capacity"], 2, "{snapshot}");
    assert_eq!(snapshot["capacity_ratio"], 1.0, "{snapshot}");

    let metrics = metrics_text(&gateway.base_url()).await;
    assert!(
        metric_value(
            &metrics,
            "switchyard_admission_detector_verdicts_total{verdict=\"demand_overload\"}"
        ) >= 1.0,
        "the detector saw demand overload"
    );
    assert_eq!(
        metric_value(
            &metrics,
            "switchyard_admission_state_transitions_total{from=\"normal\",to=\"overloaded\"}"
        ),
        0.0,
        "and did not cut capacity for it"
    );
}

/// The adaptive limit through the real gateway: it measures the no-load latency at its
/// floor first, then grows under saturating demand, and counts each decision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adaptive_limit_probes_then_grows_under_saturating_demand() {
    let adaptive = serde_json::from_value(serde_json::json!({
        "max_concurrent": 32,
        "adaptive": {"enabled": true, "min_limit": 2, "min_rtt_samples": 10, "update_interval_ms": 100},
    }))
    .unwrap();
    let (_sims, gateway, url) = two_slow_sims_behind(adaptive).await;
    let body = chat("sim-llama", "hello there", false).to_string();

    // 24 clients, one request at a time each: more than the two sims run at once (16).
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..24 {
        let (url, body, stop) = (url.clone(), body.clone(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut ok = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let reply = send(Method::POST, &url, &[], body.clone()).await;
                if reply.status == 200 {
                    ok += 1;
                } else {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            ok
        }));
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let snapshot = admin_call(
        &gateway.base_url(),
        ADMIN_KEY,
        Method::GET,
        "/admin/admission",
        serde_json::Value::Null,
    )
    .await
    .json();
    let metrics = metrics_text(&gateway.base_url()).await;
    stop.store(true, Ordering::Relaxed);
    let mut served = 0;
    for client in clients {
        served += client.await.unwrap();
    }

    assert!(served > 50, "{served}");
    let limit = snapshot["adaptive_limit"].as_u64().expect("adaptive_limit");
    assert!((6..=32).contains(&limit), "grew past its floor: {snapshot}");
    assert!(
        snapshot["adaptive_min_rtt_ms"].as_f64().unwrap_or(0.0) > 0.0,
        "{snapshot}"
    );
    let decisions = |decision: &str| {
        metric_value(
            &metrics,
            &format!("switchyard_admission_adaptive_decisions_total{{decision=\"{decision}\"}}"),
        )
    };
    assert_eq!(decisions("probe_measured"), 1.0);
    assert!(decisions("grew") >= 1.0);
}
