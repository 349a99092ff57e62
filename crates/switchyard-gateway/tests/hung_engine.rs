#![allow(clippy::unwrap_used, clippy::expect_used)]
//! No request dies with a worker: an engine that hangs while `/health` says 200, a stream
//! that stalls mid-way, a worker killed under traffic. Real simulated workers and the
//! gateway over loopback.

mod common;

use common::*;
use std::time::Duration;
use switchyard_gateway::Config;
use switchyard_sim::Fault;
use tokio::time::Instant;

/// Settings for a fleet of fast sims: known models, quick probes, short first-byte caps.
fn hang_config(config: &mut Config) {
    for spec in &mut config.workers {
        spec.models = Some(vec!["sim-llama".into()]);
    }
    quick_hang_detection(config);
}

/// One request with a client-side bound; `None` if it got no complete answer in time.
async fn chat_answered(url: String, stream: bool, bound: Duration) -> Option<(u16, String)> {
    answered(url, chat("sim-llama", "hello there", stream), bound).await
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
    a_hung_engine_loses_no_request(&base, async { sims[0].set_fault(Fault::EngineHang) }).await;
    let text = metrics_text(&base).await;
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
        let (status, body) = chat_answered(url.clone(), i % 2 == 0, Duration::from_secs(10))
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
    let text = metrics_text(&base).await;
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
    let StreamRead {
        ended,
        text,
        error_after,
    } = long_stream(&base, &[]).await;
    assert!(ended, "the stream ends: {text}");
    let error_after = error_after.unwrap_or_else(|| panic!("no error event: {text}"));
    assert!(
        error_after < Duration::from_millis(1500),
        "error {error_after:?} after the last chunk (idle 0.5 s)"
    );
    assert!(text.contains("upstream_stream_stalled"), "{text}");
    assert!(!text.contains("[DONE]"), "never a fake [DONE]: {text}");
    let tail = last_event(&text);
    assert!(
        tail.contains("\"error\""),
        "the error event is last: {text}"
    );
    let error: serde_json::Value = serde_json::from_str(tail).unwrap();
    assert_eq!(error["error"]["type"], "upstream_error");
    let text = metrics_text(&base).await;
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
        requests.push(tokio::spawn(chat_answered(
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
