#![allow(clippy::unwrap_used, clippy::expect_used)]
//! No request dies with a worker, every worker a separate process: one killed with SIGKILL
//! under load, an engine that hangs while `/health` says 200, a stream stalled mid-way.

mod common;
mod sim_process;

use common::*;
use http::Method;
use serde_json::json;
use sim_process::{SimProcess, spawn_sims};
use std::time::Duration;
use switchyard_gateway::Config;
use tokio::time::Instant;

/// The test that a re-executed child process runs as its worker.
const ENTRY: &str = "worker_process_entry";

/// Not a check: the body of a worker process when this binary is re-executed as one.
#[tokio::test]
async fn worker_process_entry() {
    sim_process::serve_if_child().await;
}

fn config_for_processes(sims: &[SimProcess]) -> Config {
    let mut config = Config::default();
    config.server.port = 0;
    config.routing.policy = "round_robin".into();
    config.workers = sims.iter().map(SimProcess::spec).collect();
    config
}

#[tokio::test]
async fn a_worker_killed_with_sigkill_costs_no_request_arriving_a_second_later() {
    // Real pace (5 ms a token, 64 tokens): the victim has requests in flight when it dies.
    let mut sims = spawn_sims(3, 1.0, ENTRY).await;
    // Shipped health, breaker and retry settings.
    let gateway = switchyard_gateway::start(config_for_processes(&sims), Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");
    let mut request = chat("sim-llama", "tell me about the weather", false);
    request["max_tokens"] = json!(64);

    let started = Instant::now();
    let kill_at = Duration::from_millis(1500);
    let mut killed_at = None;
    let mut requests = Vec::new();
    // About 30 requests a second for 5 s, open loop.
    let mut ticker = tokio::time::interval(Duration::from_millis(33));
    while started.elapsed() < Duration::from_secs(5) {
        ticker.tick().await;
        if killed_at.is_none() && started.elapsed() >= kill_at {
            sims[1].sigkill().await;
            killed_at = Some(started.elapsed());
        }
        let sent = started.elapsed();
        let task = tokio::spawn(answered(
            url.clone(),
            request.clone(),
            Duration::from_secs(20),
        ));
        requests.push((sent, task));
    }
    let killed_at = killed_at.unwrap();

    let mut late = 0;
    let mut early_errors = Vec::new();
    for (sent, task) in requests {
        let outcome = task.await.unwrap();
        let ok = outcome
            .as_ref()
            .is_some_and(|(status, body)| complete(false, *status, body));
        if sent >= killed_at + Duration::from_secs(1) {
            late += 1;
            assert!(
                ok,
                "a request sent {:?} after the kill failed: {outcome:?}",
                sent - killed_at
            );
        } else if !ok {
            early_errors.push((sent, outcome));
        }
    }
    assert!(late >= 50, "only {late} requests after the first second");
    let text = metrics_text(&base).await;
    let victim_answers: f64 = text
        .lines()
        .filter(|l| l.starts_with("switchyard_requests_total{") && l.contains("worker=\"sim-1\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(victim_answers >= 5.0, "sim-1 served traffic before it died");
    eprintln!(
        "errors among requests sent before kill + 1 s: {}",
        early_errors.len()
    );
}

#[tokio::test]
async fn an_engine_hang_in_a_worker_process_loses_no_request_and_is_filtered_within_2s() {
    let sims = spawn_sims(3, 0.05, ENTRY).await;
    let mut config = config_for_processes(&sims);
    quick_hang_detection(&mut config);
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let hang = sims[0].set_fault(json!({"mode": "engine_hang"}));
    a_hung_engine_loses_no_request(&gateway.base_url(), hang).await;
}

#[tokio::test]
async fn a_stream_stalled_by_a_worker_process_ends_in_an_error_counted_once_and_charged_as_streamed()
 {
    const KEY: &str = "sk-stall-tenant-0001";
    let sims = spawn_sims(1, 0.05, ENTRY).await;
    let mut config = config_for_processes(&sims);
    config.upstream.stream_idle_timeout_ms = 500;
    config.admission = serde_json::from_value(json!({
        "tenants": [{"api_key": KEY, "caller": "team-a", "tokens_per_day": 1_000_000,
                     "tokens_per_minute": 100_000}]
    }))
    .unwrap();
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    sims[0]
        .set_fault(json!({"mode": "stall", "after_chunks": 3}))
        .await;
    // A long answer is reserved (over 1000 tokens) and only three tokens ever stream.
    let auth = format!("Bearer {KEY}");
    let StreamRead {
        ended,
        text,
        error_after,
    } = long_stream(&base, &[("authorization", &auth)]).await;
    assert!(ended, "the stream ends: {text}");
    let error_after = error_after.unwrap_or_else(|| panic!("no error event: {text}"));
    eprintln!("error event {error_after:?} after the last chunk (idle timeout 0.5 s)");
    // Within idle_timeout (0.5 s) + 1 s of the last chunk.
    assert!(
        error_after < Duration::from_millis(1500),
        "error {error_after:?} after the last chunk"
    );
    assert!(
        !text.contains("[DONE]"),
        "never a [DONE] after an error: {text}"
    );
    let error: serde_json::Value = serde_json::from_str(last_event(&text)).unwrap();
    assert_eq!(error["error"]["code"], "upstream_stream_stalled", "{text}");

    let metrics = metrics_text(&base).await;
    // One call, one verdict: a failure, not a success at the first chunk and then a failure.
    let calls = |outcome: &str| {
        metric_value(
            &metrics,
            &format!(
                "switchyard_worker_breaker_calls_total{{outcome=\"{outcome}\",worker=\"sim-0\"}}"
            ),
        )
    };
    assert_eq!(
        (calls("success"), calls("failure")),
        (0.0, 1.0),
        "{metrics}"
    );
    // The quota is charged what was streamed (prompt estimate + 3 chunks), not the
    // 1000-token reservation.
    let spent: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("switchyard_ledger_spend_tokens_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        (3.0..100.0).contains(&spent),
        "charged {spent} tokens: {metrics}"
    );
    // Admission is settled too: the dispatch slot is back and the reservation refunded.
    assert_eq!(
        metric_value(&metrics, "switchyard_admission_dispatch_slots_in_use"),
        0.0,
        "{metrics}"
    );
    assert_eq!(
        metric_value(
            &metrics,
            "switchyard_admission_bucket_settlements_total{outcome=\"refund\"}"
        ),
        1.0,
        "{metrics}"
    );
}

/// One stream with a client-side bound: its whole body, or `None` if it did not end in time.
async fn streamed(url: String, bound: Duration) -> Option<String> {
    let mut request = chat("sim-llama", "hello there", true);
    request["max_tokens"] = json!(32);
    answered(url, request, bound).await.map(|(_, body)| body)
}

/// A worker whose every stream stalls after its first chunks is never silent while new
/// streams keep arriving; the per-stream signal marks it hung within the window anyway.
#[tokio::test]
async fn a_worker_process_stalling_every_stream_is_filtered_while_streams_keep_arriving() {
    let sims = spawn_sims(3, 1.0, ENTRY).await;
    let mut config = config_for_processes(&sims);
    config.health.prober.interval_ms = 100;
    config.health.prober.latency_bound_ms = 1000;
    // Short enough that the stuck streams end within the test.
    config.upstream.stream_idle_timeout_ms = 3000;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");

    let started = Instant::now();
    let stall_at = Duration::from_millis(1000);
    let mut stalled_at = None;
    let mut filtered_at = None;
    let mut requests = Vec::new();
    // 20 streams a second for 5 s, open loop, the state polled between them.
    let mut ticker = tokio::time::interval(Duration::from_millis(50));
    while started.elapsed() < Duration::from_secs(5) {
        ticker.tick().await;
        if stalled_at.is_none() && started.elapsed() >= stall_at {
            sims[0]
                .set_fault(json!({"mode": "stall", "after_chunks": 3}))
                .await;
            stalled_at = Some(started.elapsed());
        }
        requests.push((
            started.elapsed(),
            tokio::spawn(streamed(url.clone(), Duration::from_secs(10))),
        ));
        if stalled_at.is_some()
            && filtered_at.is_none()
            && worker_state(&base, "sim-0").await == "hung"
        {
            filtered_at = Some(started.elapsed());
        }
    }
    let stalled_at = stalled_at.unwrap();
    let filtered_at = filtered_at.expect("sim-0 marked hung while streams kept arriving");
    let took = filtered_at - stalled_at;
    eprintln!("stalling worker filtered {took:?} after the stall");
    assert!(
        took < Duration::from_secs(3),
        "filtered only after {took:?}"
    );

    let all = admin_call(&base, ADMIN_KEY, Method::GET, "/admin/workers", json!(null))
        .await
        .json();
    let sim0 = all["workers"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == "sim-0"))
        .cloned()
        .unwrap();
    assert_eq!(sim0["last_transition"], "hung_stalled_streams", "{sim0}");

    // Every client got its answer or a clear error; none sent after the mark failed.
    let mut stalled = 0;
    for (sent, task) in requests {
        let body = task.await.unwrap().expect("every stream ends");
        if complete(true, 200, &body) {
            continue;
        }
        assert!(
            body.contains("upstream_stream_stalled") && !body.contains("[DONE]"),
            "{body}"
        );
        assert!(
            sent < filtered_at,
            "a stream sent {:?} after the mark failed",
            sent - filtered_at
        );
        stalled += 1;
    }
    assert!(stalled >= 2, "the stall met {stalled} streams");
    let metrics = metrics_text(&base).await;
    assert_eq!(
        metric_value(
            &metrics,
            "switchyard_worker_hung_checks_total{verdict=\"stalled_streams\",worker=\"sim-0\"}"
        ),
        1.0,
        "{metrics}"
    );

    // The worker comes back: the prober confirms it and it is not marked again.
    sims[0].set_fault(json!({"mode": "ok"})).await;
    let back = eventually(Duration::from_secs(5), || async {
        worker_state(&base, "sim-0").await == "healthy"
    })
    .await;
    assert!(back, "probes bring the worker back");
}
