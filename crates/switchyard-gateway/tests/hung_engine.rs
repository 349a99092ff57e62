#![allow(clippy::unwrap_used, clippy::expect_used)]
//! No request dies with a worker: an engine that hangs while `/health` says 200, a stream
//! that stalls mid-way, a worker killed under traffic. Real simulated workers and the
//! gateway over loopback.

mod common;

use common::*;
use http::Method;
use http_body_util::BodyExt;
use std::time::Duration;
use switchyard_gateway::Config;
use switchyard_sim::Fault;
use tokio::time::Instant;

fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or(0.0)
}

async fn metrics(base: &str) -> String {
    send(Method::GET, &format!("{base}/metrics"), &[], "")
        .await
        .body
}

/// Settings for a fleet of fast sims: known models, quick probes, short first-byte caps.
fn hang_config(config: &mut Config) {
    for spec in &mut config.workers {
        spec.models = Some(vec!["sim-llama".into()]);
    }
    config.health.prober.interval_ms = 100;
    config.health.prober.latency_bound_ms = 1000;
    config.upstream.first_byte.floor_ms = 300;
    config.upstream.first_byte.cap_ms = 1500;
}

async fn worker_state(base: &str, name: &str) -> String {
    let all = send(
        Method::GET,
        &format!("{base}/admin/workers"),
        &[("authorization", &format!("Bearer {ADMIN_KEY}"))],
        "",
    )
    .await
    .json();
    all["workers"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == name))
        .and_then(|w| w["state"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// One request with a client-side bound; `None` if it got no complete answer in time.
async fn answered(url: String, stream: bool, bound: Duration) -> Option<(u16, String)> {
    let body = chat("sim-llama", "hello there", stream).to_string();
    let exchange = async {
        let reply = send(
            Method::POST,
            &url,
            &[("content-type", "application/json")],
            body,
        )
        .await;
        (reply.status.as_u16(), reply.body)
    };
    tokio::time::timeout(bound, exchange).await.ok()
}

fn complete(stream: bool, status: u16, body: &str) -> bool {
    status == 200
        && if stream {
            body.trim_end().ends_with("data: [DONE]") && !body.contains("\"error\"")
        } else {
            body.contains("\"usage\"")
        }
}

#[tokio::test]
async fn an_engine_hang_with_health_200_loses_no_request_and_is_filtered_within_2s() {
    let sims = start_sims(3).await;
    let mut config = config_for(&sims, "round_robin");
    hang_config(&mut config);
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");
    for _ in 0..6 {
        let (status, body) = answered(url.clone(), false, Duration::from_secs(10))
            .await
            .unwrap();
        assert!(complete(false, status, &body), "{status} {body}");
    }

    sims[0].set_fault(Fault::EngineHang);
    let hung_at = Instant::now();
    // Traffic keeps arriving while (and after) the engine hangs: every request is answered.
    let mut requests = Vec::new();
    for i in 0..24 {
        let stream = i % 2 == 0;
        requests.push((
            stream,
            tokio::spawn(answered(url.clone(), stream, Duration::from_secs(10))),
        ));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let filtered = eventually(Duration::from_secs(2), || async {
        worker_state(&base, "sim-0").await != "healthy"
    })
    .await;
    let took = hung_at.elapsed();
    assert!(
        filtered,
        "sim-0 still routable {took:?} after its engine hung"
    );
    for (i, (stream, request)) in requests.into_iter().enumerate() {
        let (status, body) = request
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("request {i} got no answer within 10 s"));
        assert!(
            complete(stream, status, &body),
            "request {i}: {status} {body}"
        );
    }
    assert_eq!(worker_state(&base, "sim-0").await, "hung");
    let text = metrics(&base).await;
    let moved = metric_value(
        &text,
        "switchyard_attempt_first_byte_total{outcome=\"rescued\"}",
    ) + metric_value(
        &text,
        "switchyard_attempt_first_byte_total{outcome=\"deadline\"}",
    );
    assert!(moved >= 1.0, "requests on the hung worker moved: {text}");
    assert!(
        text.contains("switchyard_worker_state{state=\"hung\",worker=\"sim-0\"} 1"),
        "the hung state is a metric"
    );

    // The engine comes back: the prober confirms it and routing resumes.
    sims[0].set_fault(Fault::Ok);
    let back = eventually(Duration::from_secs(5), || async {
        worker_state(&base, "sim-0").await == "healthy"
    })
    .await;
    assert!(back, "probes bring the worker back");
}

#[tokio::test]
async fn a_missed_first_byte_deadline_retries_on_another_worker() {
    let sims = start_sims(2).await;
    let mut config = config_for(&sims, "round_robin");
    hang_config(&mut config);
    // Only the deadline acts here: no hung mark to rescue the request earlier.
    config.health.hung.active = false;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");
    sims[0].set_fault(Fault::EngineHang);
    for i in 0..4 {
        let started = Instant::now();
        let (status, body) = answered(url.clone(), i % 2 == 0, Duration::from_secs(10))
            .await
            .expect("answered");
        assert!(complete(i % 2 == 0, status, &body), "{status} {body}");
        // No figures yet: the cap (1.5 s) bounds the wait on the hung worker.
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }
    let text = metrics(&base).await;
    assert!(
        metric_value(
            &text,
            "switchyard_attempt_first_byte_total{outcome=\"deadline\"}"
        ) >= 1.0,
        "{text}"
    );
    assert!(
        metric_value(
            &text,
            "switchyard_upstream_errors_total{kind=\"first_byte_deadline\"}"
        ) >= 1.0
    );
    assert_eq!(sims[1].stats().requests_completed, 4);
}

#[tokio::test]
async fn a_stalled_stream_ends_with_an_error_event_and_no_done() {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    hang_config(&mut config);
    config.upstream.stream_idle_timeout_ms = 500;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    sims[0].set_fault(Fault::Stall { after_chunks: 3 });
    // A long answer is reserved (over 1000 tokens) and only three tokens ever stream.
    let mut request = chat("sim-llama", "hello", true);
    request["max_tokens"] = serde_json::json!(1000);
    let response = open(
        Method::POST,
        &format!("{base}/v1/chat/completions"),
        &[("content-type", "application/json")],
        request.to_string(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut text = String::new();
    let mut last_chunk_at = Instant::now();
    let mut error_after = None;
    let read = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            if let Some(data) = frame.data_ref() {
                let piece = String::from_utf8_lossy(data);
                if piece.contains("\"error\"") {
                    error_after = Some(last_chunk_at.elapsed());
                } else {
                    last_chunk_at = Instant::now();
                }
                text.push_str(&piece);
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the stream ends: {text}");
    let error_after = error_after.unwrap_or_else(|| panic!("no error event: {text}"));
    assert!(
        error_after < Duration::from_millis(1500),
        "error {error_after:?} after the last chunk (idle 0.5 s)"
    );
    assert!(text.contains("upstream_stream_stalled"), "{text}");
    assert!(!text.contains("[DONE]"), "never a fake [DONE]: {text}");
    let tail = text.rsplit("\n\n").find(|e| !e.is_empty()).unwrap();
    assert!(
        tail.contains("\"error\""),
        "the error event is last: {text}"
    );
    let error: serde_json::Value =
        serde_json::from_str(tail.trim().strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(error["error"]["type"], "upstream_error");
    let text = metrics(&base).await;
    assert_eq!(
        metric_value(
            &text,
            "switchyard_upstream_errors_total{kind=\"stream_idle\"}"
        ),
        1.0
    );
    // Settled on what was streamed (prompt estimate + 3 chunks), not the 1000-token estimate.
    let settled = metric_value(&text, "switchyard_warmup_traffic_tokens_total");
    assert!(
        (3.0..100.0).contains(&settled),
        "settled on {settled} tokens"
    );
}

#[tokio::test]
async fn a_killed_worker_costs_no_request_arriving_a_second_later() {
    let mut sims = start_sims(3).await;
    let mut config = config_for(&sims, "round_robin");
    hang_config(&mut config);
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    // Dropping the worker aborts its server and every connection, as a SIGKILL would.
    let victim = sims.remove(0);
    drop(victim);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut requests = Vec::new();
    for _ in 0..30 {
        requests.push(tokio::spawn(answered(
            url.clone(),
            false,
            Duration::from_secs(10),
        )));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (i, request) in requests.into_iter().enumerate() {
        let (status, body) = request.await.unwrap().expect("answered");
        assert!(
            complete(false, status, &body),
            "request {i}: {status} {body}"
        );
    }
}
