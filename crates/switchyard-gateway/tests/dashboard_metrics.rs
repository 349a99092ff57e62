#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every `switchyard_*` series the Grafana dashboard and the Prometheus alert rules query is
//! emitted by a running gateway's `/metrics` once it has seen ordinary traffic, a refusal and
//! a failing worker: a renamed metric breaks this test, not an operator's dashboard.

mod common;

use common::*;
use http::Method;
use std::collections::BTreeSet;
use std::time::Duration;
use switchyard_gateway::{Config, StartOptions};
use switchyard_sim::Fault;

const DASHBOARD: &str = include_str!("../../../deploy/grafana/switchyard-dashboard.json");
const ALERTS: &str = include_str!("../../../deploy/prometheus/alerts.yml");

fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(found) = text[i..].find("switchyard_") {
        let start = i + found;
        let mut end = start + "switchyard_".len();
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'_')
        {
            end += 1;
        }
        if end > start + "switchyard_".len() {
            names.insert(text[start..end].to_string());
        }
        i = end;
    }
    names
}

fn queried_names() -> BTreeSet<String> {
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD).unwrap();
    let mut exprs = String::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            exprs.push_str(target["expr"].as_str().unwrap());
            exprs.push('\n');
        }
    }
    let mut names = metric_names(&exprs);
    assert!(
        names.len() >= 20,
        "the dashboard queries too little: {names:?}"
    );
    let alerts = metric_names(ALERTS);
    assert!(alerts.len() >= 8, "too few alert rules: {alerts:?}");
    names.extend(alerts);
    names
}

fn emitted_names(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .filter_map(|line| line.split(['{', ' ']).next())
        .map(str::to_string)
        .collect()
}

#[test]
fn the_name_scanner_finds_names_in_queries() {
    let names = metric_names(
        r#"sum(rate(switchyard_a_total{x="switchyard-b"}[5m])) / switchyard_c_bucket"#,
    );
    let expected: BTreeSet<String> = ["switchyard_a_total", "switchyard_c_bucket"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(names, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_the_dashboard_and_alerts_query_is_emitted() {
    let wanted = queried_names();
    let sims = start_sims(3).await;
    let mut config: Config = Config::parse(
        r#"
[[admission.tenants]]
api_key = "sk-steady"
caller = "steady"
tokens_per_day = 10000000

[[admission.tenants]]
api_key = "sk-tiny"
caller = "tiny"
tokens_per_minute = 1
"#,
    )
    .unwrap();
    config.server.port = 0;
    config.routing.policy = "cache_aware".into();
    config.workers = specs(&sims);
    let gateway = switchyard_gateway::start_with(
        config,
        StartOptions {
            admin_key: Some(ADMIN_KEY.into()),
            ..StartOptions::default()
        },
    )
    .await
    .unwrap();
    let base = gateway.base_url();
    let chat_url = format!("{base}/v1/chat/completions");
    let as_caller = |key: &'static str| {
        let auth = format!("Bearer {key}");
        let url = chat_url.clone();
        async move {
            let body = chat(
                "sim-llama",
                "the same long shared system prompt, then a question",
                true,
            );
            send(
                Method::POST,
                &url,
                &[
                    ("content-type", "application/json"),
                    ("authorization", &auth),
                ],
                body.to_string(),
            )
            .await
        }
    };

    // A refusal by the token bucket.
    let mut refused = false;
    for _ in 0..5 {
        refused |= as_caller("sk-tiny").await.status == 429;
    }
    assert!(refused, "the tiny tenant was never refused");
    // Ordinary streamed traffic with a shared prefix.
    for _ in 0..6 {
        assert_eq!(as_caller("sk-steady").await.status, 200);
    }
    // Every worker failing for a moment: whichever one routing picks, the attempt fails.
    for sim in &sims {
        sim.set_fault(Fault::Error);
    }
    for _ in 0..3 {
        as_caller("sk-steady").await;
    }
    for sim in &sims {
        sim.set_fault(Fault::Ok);
    }

    // Worker latency gauges need a few collector scrapes: poll, with traffic, until all appear.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let missing = loop {
        as_caller("sk-steady").await;
        let metrics = send(Method::GET, &format!("{base}/metrics"), &[], "").await;
        let emitted = emitted_names(&metrics.body);
        let missing: BTreeSet<String> = wanted.difference(&emitted).cloned().collect();
        if missing.is_empty() || tokio::time::Instant::now() >= deadline {
            break missing;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(missing.is_empty(), "queried but never emitted: {missing:?}");
    gateway.shutdown().await;
}
