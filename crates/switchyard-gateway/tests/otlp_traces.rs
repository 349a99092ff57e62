#![allow(clippy::unwrap_used, clippy::expect_used)]
//! OTLP traces from the real binary: a request's spans (`request` → `admit`, `select`,
//! `attempt`, `stream`) reach a fake OTLP/HTTP collector on loopback in the client's trace,
//! the `attempt` span's id is the parent the worker saw in `traceparent`, and the exported
//! spans are counted in `/metrics`.

mod common;

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use common::*;
use http::Method;
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

type Posts = Arc<Mutex<Vec<Value>>>;

async fn collector() -> (String, Posts) {
    let posts: Posts = Arc::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(|State(posts): State<Posts>, body: String| async move {
                posts.lock().push(serde_json::from_str(&body).unwrap());
                "{}"
            }),
        )
        .with_state(posts.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, posts)
}

/// Every exported span of one trace.
fn spans_of(posts: &Posts, trace_id: &str) -> Vec<Value> {
    posts
        .lock()
        .iter()
        .flat_map(|post| {
            post["resourceSpans"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .flat_map(|r| r["scopeSpans"].as_array().cloned().unwrap_or_default())
        .flat_map(|s| s["spans"].as_array().cloned().unwrap_or_default())
        .filter(|span| span["traceId"] == trace_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_spans_reach_the_collector_in_the_clients_trace() {
    let worker = CaptureWorker::start((3, 2)).await;
    let (collector_url, posts) = collector().await;
    let worker_arg = format!("w={}", worker.url);
    let gateway = GatewayProcess::spawn(&[
        "--worker-url",
        &worker_arg,
        "--policy",
        "round_robin",
        "--otlp-endpoint",
        &collector_url,
        "--otlp-batch-ms",
        "100",
    ])
    .await;
    let url = format!("{}/v1/chat/completions", gateway.base_url);
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_parent = format!("00-{trace_id}-00f067aa0ba902b7-01");
    let last_reply = Mutex::new(String::new());
    let ready = eventually(Duration::from_secs(20), || async {
        let reply = send(
            Method::POST,
            &url,
            &[
                ("content-type", "application/json"),
                ("traceparent", &client_parent),
            ],
            chat("sim-llama", "hi", false).to_string(),
        )
        .await;
        *last_reply.lock() = format!("{} {}", reply.status, reply.body);
        reply.status == 200
    })
    .await;
    assert!(
        ready,
        "the gateway never answered 200; last reply {}; log:\n{}",
        last_reply.lock(),
        gateway.log_tail()
    );

    let names = ["request", "admit", "select", "attempt", "stream"];
    let complete = eventually(Duration::from_secs(10), || async {
        let spans = spans_of(&posts, trace_id);
        names.iter().all(|n| {
            spans
                .iter()
                .any(|s| s["name"] == *n && s["endTimeUnixNano"].is_string())
        })
    })
    .await;
    let spans = spans_of(&posts, trace_id);
    assert!(complete, "spans exported: {spans:#?}");
    // The last request's spans (earlier tries may have met a worker not yet discovered).
    let request = spans
        .iter()
        .filter(|s| s["name"] == "request")
        .find(|request| {
            let id = &request["spanId"];
            names[1..].iter().all(|n| {
                spans
                    .iter()
                    .any(|s| s["name"] == *n && s["parentSpanId"] == *id)
            })
        })
        .unwrap_or_else(|| panic!("no request span with all its stages: {spans:#?}"));
    assert_eq!(
        request["parentSpanId"], "00f067aa0ba902b7",
        "the client's span"
    );
    assert_eq!(request["kind"], 2, "server");
    let child = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name && s["parentSpanId"] == request["spanId"])
            .unwrap()
            .clone()
    };
    let attempt = child("attempt");
    assert_eq!(attempt["kind"], 3, "client");
    let attribute = |span: &Value, key: &str| {
        span["attributes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["key"] == key)
            .map(|a| a["value"].clone())
    };
    assert_eq!(
        attribute(&attempt, "worker"),
        Some(serde_json::json!({"stringValue": "w"}))
    );
    // The worker saw the attempt span as its parent.
    let forwarded: Vec<String> = worker
        .heads
        .lock()
        .iter()
        .filter(|h| h.starts_with("post "))
        .filter_map(|h| {
            h.lines()
                .find_map(|l| l.strip_prefix("traceparent:"))
                .map(|v| v.trim().to_string())
        })
        .collect();
    let expected = format!("00-{trace_id}-{}-01", attempt["spanId"].as_str().unwrap());
    assert!(
        forwarded.contains(&expected),
        "{expected} not in {forwarded:?}"
    );
    let start = |s: &Value| {
        s["startTimeUnixNano"]
            .as_str()
            .unwrap()
            .parse::<u128>()
            .unwrap()
    };
    let end = |s: &Value| {
        s["endTimeUnixNano"]
            .as_str()
            .unwrap()
            .parse::<u128>()
            .unwrap()
    };
    for name in &names[1..] {
        let span = child(name);
        assert!(
            start(&span) >= start(request) && end(&span) <= end(request),
            "{name} lies outside its request"
        );
    }
    // The collector stores a batch before it answers, and the exporter counts the batch once
    // the answer arrives: the counter follows shortly after the spans are seen.
    let exported = || async {
        metrics_text(&gateway.base_url)
            .await
            .lines()
            .find_map(|l| l.strip_prefix("switchyard_telemetry_spans_exported_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let counted = eventually(Duration::from_secs(5), || async { exported().await >= 5.0 }).await;
    assert!(counted, "{}", metrics_text(&gateway.base_url).await);
}
