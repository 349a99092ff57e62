#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Context-length routing through the real gateway: workers of one model that state different
//! contexts (`max_model_len` in their `/v1/models`). A request goes only to a worker whose
//! context holds its prompt plus `max_tokens`; one that fits none is an OpenAI-shaped 400
//! (`context_length_exceeded`) that reaches no worker.

mod common;
mod echo_support;

use common::*;
use echo_support::EchoWorker;
use http::Method;
use std::time::Duration;

const MODEL: &str = "ctx-model";

fn chat(content: &str, max_tokens: u64) -> serde_json::Value {
    serde_json::json!({
        "model": MODEL,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": content}],
    })
}

async fn contexts_known(base: &str) -> bool {
    let reply = admin_call(
        base,
        ADMIN_KEY,
        Method::GET,
        "/admin/workers",
        serde_json::Value::Null,
    )
    .await;
    let workers = reply.json()["workers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    workers.len() == 2 && workers.iter().all(|w| w["max_model_len"].is_u64())
}

fn filtered_too_short(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| {
            l.strip_prefix(
                "switchyard_prefilter_workers_filtered_total{reason=\"context_too_short\"} ",
            )
        })
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn requests_go_to_a_worker_whose_context_fits_and_past_every_context_are_a_400() {
    let short = EchoWorker::start_with_context(MODEL, 1024).await;
    let long = EchoWorker::start_with_context(MODEL, 8192).await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![short.spec("short"), long.spec("long")];
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    assert!(
        eventually(Duration::from_secs(10), || contexts_known(&base)).await,
        "both workers state their context"
    );
    let url = format!("{base}/v1/chat/completions");

    // Short requests fit both: round robin uses both.
    let mut seen = Vec::new();
    for _ in 0..4 {
        let reply = post_json(&url, &chat("hello", 16)).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        seen.push(reply.header("x-switchyard-worker").unwrap().to_string());
    }
    assert!(seen.iter().any(|w| w == "short") && seen.iter().any(|w| w == "long"));

    // About 3000 tokens of prompt: only the 8192-token worker holds it, every time.
    let before = short.seen.lock().len();
    let mid = "lorem ipsum dolor sit amet ".repeat(600);
    for _ in 0..4 {
        let reply = post_json(&url, &chat(&mid, 64)).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.header("x-switchyard-worker"), Some("long"));
    }
    assert_eq!(short.seen.lock().len(), before, "the short worker saw none");
    // So does a short prompt whose requested output only the long context holds.
    let reply = post_json(&url, &chat("hello", 4000)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("x-switchyard-worker"), Some("long"));
    let metrics = send(Method::GET, &format!("{base}/metrics"), &[], "").await;
    assert!(filtered_too_short(&metrics.body) >= 5, "{}", metrics.body);

    // Past the longest context (8192): a 400 in OpenAI's shape, and no worker saw it.
    let seen_before = (short.seen.lock().len(), long.seen.lock().len());
    let huge = "lorem ipsum dolor sit amet ".repeat(2000);
    for (prompt, max_tokens) in [(huge.as_str(), 16), ("hello", 8191)] {
        let reply = post_json(&url, &chat(prompt, max_tokens)).await;
        assert_eq!(reply.status, 400, "{}", reply.body);
        let error = &reply.json()["error"];
        assert_eq!(error["code"], "context_length_exceeded", "{}", reply.body);
        assert_eq!(error["type"], "invalid_request_error", "{}", reply.body);
        assert!(
            error["message"].as_str().unwrap().contains("8192"),
            "{}",
            reply.body
        );
    }
    // Completions and Responses are judged the same way.
    let completion = post_json(
        &format!("{base}/v1/completions"),
        &serde_json::json!({"model": MODEL, "prompt": huge, "max_tokens": 4}),
    )
    .await;
    assert_eq!(completion.error_code(), "context_length_exceeded");
    let response = post_json(
        &format!("{base}/v1/responses"),
        &serde_json::json!({"model": MODEL, "input": huge}),
    )
    .await;
    assert_eq!(response.error_code(), "context_length_exceeded");
    assert_eq!(
        (short.seen.lock().len(), long.seen.lock().len()),
        seen_before,
        "refused requests reach no worker"
    );

    // Encoders take each input on its own: many inputs together longer than any context
    // still go through.
    let inputs: Vec<String> = (0..40)
        .map(|i| format!("{i} {}", "word ".repeat(250)))
        .collect();
    let embeddings = post_json(
        &format!("{base}/v1/embeddings"),
        &serde_json::json!({"model": MODEL, "input": inputs}),
    )
    .await;
    assert_eq!(embeddings.status, 200, "{}", embeddings.body);
    gateway.shutdown().await;
}
