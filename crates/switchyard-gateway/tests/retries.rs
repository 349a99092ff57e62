#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Gateway retries: only before the first byte, only to a different worker, within budget.

mod common;

use common::*;
use http::Method;
use http_body_util::BodyExt;
use switchyard_sim::Fault;
use switchyard_workers::WorkerSpec;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn a_failing_worker_is_retried_on_a_different_one() {
    let sims = start_sims(3).await;
    sims[0].set_fault(Fault::Error);
    sims[1].set_fault(Fault::Error);
    let mut config = config_for(&sims, "round_robin");
    for spec in &mut config.workers {
        spec.models = Some(vec!["sim-llama".into()]);
    }
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    for i in 0..3 {
        let before: Vec<u64> = sims.iter().map(|s| s.stats().requests_received).collect();
        let reply = post_json(&url, &chat("sim-llama", "hi", false)).await;
        assert_eq!(reply.status, 200, "request {i}: {}", reply.body);
        assert_eq!(reply.header("x-switchyard-worker"), Some("sim-2"));
        for (sim, before) in sims.iter().zip(before) {
            assert!(
                sim.stats().requests_received - before <= 1,
                "{} was tried twice for one request",
                sim.name()
            );
        }
    }
    let metrics = metrics_text(&gateway.base_url()).await;
    assert!(
        metrics.contains("switchyard_upstream_attempts_total{kind=\"retry\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn amplification_stays_under_two_when_a_worker_fails_everything() {
    let sims = start_sims(4).await;
    let mut config = config_for(&sims, "round_robin");
    // Isolate the retry budget: health checks and the breaker would otherwise take the
    // failing worker out of routing within a few requests (see drain_and_health.rs).
    config.health.health.interval_ms = 600_000;
    config.health.health.suspect_interval_ms = 600_000;
    config.health.breaker.minimum_calls = 100;
    sims[0].set_fault(Fault::Error);
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    let requests = 200u64;
    let mut ok = 0;
    for _ in 0..requests {
        if post_json(&url, &chat("sim-llama", "hi", false))
            .await
            .status
            == 200
        {
            ok += 1;
        }
    }
    let metrics = metrics_text(&gateway.base_url()).await;
    let first = metric_value(
        &metrics,
        "switchyard_upstream_attempts_total{kind=\"first\"}",
    );
    let retry = metric_value(
        &metrics,
        "switchyard_upstream_attempts_total{kind=\"retry\"}",
    );
    assert_eq!(first, requests as f64);
    let amplification = (first + retry) / first;
    // A quarter of first attempts fail, more than the 20 % ratio allows, so the budget (20 %
    // of first attempts plus the token bucket's floor) caps retries well below 2x.
    assert!(amplification <= 1.35, "amplification {amplification}");
    assert!(retry >= 30.0, "failures were retried: {retry}");
    // Every retry goes to a healthy worker (never back to the failing one), so it succeeds:
    // the failed attempts are exactly the failed first attempts.
    let failed_attempts = metric_value(
        &metrics,
        "switchyard_upstream_errors_total{kind=\"status_5xx\"}",
    );
    assert_eq!(failed_attempts, (requests - ok) as f64 + retry);
}

#[tokio::test]
async fn refused_connections_are_retried_without_spending_the_budget() {
    let sims = start_sims(1).await;
    let closed_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = config_for(&sims, "round_robin");
    config.retry.budget_capacity = 1.0;
    config.retry.budget_refill_per_sec = 0.0;
    config.retry.max_retry_ratio = 0.0;
    config.workers.push(WorkerSpec {
        name: "dead".into(),
        url: format!("http://127.0.0.1:{closed_port}"),
        models: Some(vec!["sim-llama".into()]),
        health_path: None,
        engine: None,
    });
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    for _ in 0..10 {
        let reply = post_json(&url, &chat("sim-llama", "hi", false)).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
}

/// A fake worker that starts an SSE stream, sends one event, then drops the connection.
async fn breaking_stream_worker() -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let counter = counter.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 65536];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                // Health checks also arrive here; count only inference requests.
                if !buf[..n].starts_with(b"POST") {
                    let _ = socket
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                    return;
                }
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
                let event = "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n";
                let chunk = format!("{:x}\r\n{}\r\n", event.len(), event);
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(chunk.as_bytes()).await;
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                // Dropping the socket mid-body: the stream broke.
            });
        }
    });
    (url, seen)
}

#[tokio::test]
async fn a_stream_that_breaks_after_the_first_byte_is_not_retried_and_ends_with_an_sse_error() {
    let (url, seen) = breaking_stream_worker().await;
    let sims = start_sims(1).await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![
        WorkerSpec {
            name: "flaky".into(),
            url,
            models: Some(vec!["sim-llama".into()]),
            health_path: None,
            engine: None,
        },
        WorkerSpec {
            name: "good".into(),
            url: sims[0].base_url(),
            models: Some(vec!["sim-llama".into()]),
            health_path: None,
            engine: None,
        },
    ];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let response = open(
        Method::POST,
        &format!("{}/v1/chat/completions", gateway.base_url()),
        &[("content-type", "application/json")],
        chat("sim-llama", "hi", true).to_string(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-switchyard-worker"], "flaky");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("\"content\":\"hi\""), "{text}");
    assert!(
        text.contains("upstream_stream_error"),
        "a clean SSE error event: {text}"
    );
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(
        sims[0].stats().requests_received,
        0,
        "never retried elsewhere"
    );
}
