#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Two real llama.cpp `llama-server` workers behind the gateway: chat and completions,
//! streaming and not, usage with cached tokens, the tokenizer, engine errors passed through,
//! health and load from the engine itself, cancellation on client disconnect freeing the
//! engine's slot, and a worker SIGKILLed mid-run.
//!
//! Needs the binary and model from `benches/e2e/llama/build.sh` (or `SWITCHYARD_LLAMA_SERVER`
//! and `SWITCHYARD_LLAMA_MODEL`) and `SWITCHYARD_LLAMA_E2E=1`; skips with a message otherwise.

mod common;
mod llama_support;

use common::*;
use http::Method;
use http_body_util::BodyExt;
use llama_support::{LlamaServer, MODEL, paths};
use std::time::{Duration, Instant};

async fn workers(base: &str) -> Vec<serde_json::Value> {
    admin_call(
        base,
        ADMIN_KEY,
        Method::GET,
        "/admin/workers",
        serde_json::Value::Null,
    )
    .await
    .json()["workers"]
        .as_array()
        .unwrap()
        .clone()
}

fn chat_body(content: &str, max_tokens: u32, stream: bool) -> serde_json::Value {
    serde_json::json!({
        "model": MODEL,
        "stream": stream,
        "stream_options": {"include_usage": true},
        "max_tokens": max_tokens,
        "temperature": 0,
        "messages": [{"role": "user", "content": content}],
    })
}

/// The `data:` payloads of an SSE body, `[DONE]` excluded.
fn sse_events(body: &str) -> Vec<serde_json::Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_real_llama_servers_behind_the_gateway() {
    let Some(paths) = paths() else {
        return;
    };
    let a = LlamaServer::start(&paths, "llama-a", free_port(), 2).await;
    let mut b = LlamaServer::start(&paths, "llama-b", free_port(), 2).await;
    eprintln!(
        "llama-server ready in {:?} / {:?} (503 while loading seen: {} / {})",
        a.started_in, b.started_in, a.saw_loading, b.saw_loading
    );
    // The engine's own health: 503 with "Loading model" until the model is in memory (what
    // the gateway's health check, non-2xx = not ready, keeps it out of routing by).
    assert!(a.saw_loading && b.saw_loading, "no 503 seen while loading");
    let mut config = config_for(&[], "cache_aware");
    config.workers = vec![a.spec(), b.spec()];
    config.health.latency_aware.scrape_interval_ms = 300;
    // A CPU engine on this shared machine prefills a few tens of tokens a second, a hundredth
    // of the default's GPU pace: without saying so, a 200-token prompt would miss its
    // first-byte deadline (the pace is learned only from streams of 512+ prompt tokens).
    config.upstream.first_byte.cold_prefill_tokens_per_second = 10;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();

    // Discovery, health and load come from the engines themselves.
    let ready = eventually(Duration::from_secs(20), || async {
        let workers = workers(&base).await;
        workers.len() == 2
            && workers.iter().all(|w| {
                w["healthy"] == true
                    && w["models"] == serde_json::json!([MODEL])
                    && w["engine"] == "llamacpp"
                    && w["max_model_len"].as_u64() == Some(2048)
                    && w["engine_load"]["running"].is_number()
            })
    })
    .await;
    assert!(
        ready,
        "workers as the gateway sees them: {:?}",
        workers(&base).await
    );

    // Chat, not streamed: content and usage.
    let url = format!("{base}/v1/chat/completions");
    let reply = post_json(
        &url,
        &chat_body("What is the capital of France?", 12, false),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let body = reply.json();
    assert!(
        !body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );
    let usage = &body["usage"];
    assert!(usage["prompt_tokens"].as_u64().unwrap() > 5, "{usage}");
    assert!(
        (1..=12).contains(&usage["completion_tokens"].as_u64().unwrap()),
        "{usage}"
    );

    // Chat, streamed: deltas, a final usage chunk, [DONE].
    let reply = post_json(&url, &chat_body("Name three colours.", 12, true)).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(
        reply
            .header("content-type")
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert!(
        reply.body.trim_end().ends_with("data: [DONE]"),
        "{}",
        reply.body
    );
    let events = sse_events(&reply.body);
    let text: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert!(!text.is_empty(), "{}", reply.body);
    let usage = events
        .iter()
        .rev()
        .find(|e| e["usage"].is_object())
        .unwrap();
    assert!(usage["usage"]["completion_tokens"].as_u64().unwrap() >= 1);

    // Completions, both ways.
    let url = format!("{base}/v1/completions");
    let completion = serde_json::json!({"model": MODEL, "prompt": "Once upon a time", "max_tokens": 8, "temperature": 0});
    let reply = post_json(&url, &completion).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.json()["usage"]["total_tokens"].as_u64().unwrap() > 0);
    let mut streamed = completion.clone();
    streamed["stream"] = true.into();
    let reply = post_json(&url, &streamed).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(!sse_events(&reply.body).is_empty());

    // The same long prompt twice lands on the same engine (cache_aware), which reports the
    // reused prefix as cached tokens.
    let long = format!(
        "{} Summarise the text above in one word.",
        "The river flows past the old mill and the children play on its banks. ".repeat(12)
    );
    // The reuse shows in real latency too: the repeat skips the prefill of the prefix.
    let url = format!("{base}/v1/chat/completions");
    let started = Instant::now();
    let first = post_json(&url, &chat_body(&long, 4, false)).await;
    let first_took = started.elapsed();
    let started = Instant::now();
    let second = post_json(&url, &chat_body(&long, 4, false)).await;
    let second_took = started.elapsed();
    assert_eq!(
        (first.status.as_u16(), second.status.as_u16()),
        (200, 200),
        "{}",
        second.body
    );
    assert_eq!(
        first.header("x-switchyard-worker"),
        second.header("x-switchyard-worker")
    );
    let cached = second.json()["usage"]["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0);
    assert!(cached > 100, "cached tokens on the repeat: {}", second.body);
    assert!(
        second_took < first_took / 2,
        "the repeat took {second_took:?}, the first {first_took:?}"
    );
    eprintln!("repeated prefix: first {first_took:?}, repeat {second_took:?} ({cached} cached)");

    // llama.cpp publishes no latency histograms: the gateway's own observations stand in.
    // (A window restarts once it has enough samples, so each poll adds one.)
    let observed = eventually(Duration::from_secs(20), || async {
        post_json(&url, &chat_body("Hi.", 1, false)).await;
        workers(&base).await.iter().any(|w| {
            w["latency"]["source"] == "gateway_observed"
                && w["latency"]["ttft_samples"].as_u64().unwrap_or(0) > 0
        })
    })
    .await;
    assert!(observed, "latency figures: {:?}", workers(&base).await);

    // The tokenizer round trip (llama.cpp's endpoints take no model; one is served).
    let tokens = post_json(
        &format!("{base}/tokenize"),
        &serde_json::json!({"content": "Hello world"}),
    )
    .await;
    assert_eq!(tokens.status, 200, "{}", tokens.body);
    let ids = tokens.json()["tokens"].clone();
    assert!(
        ids.as_array().is_some_and(|t| !t.is_empty()),
        "{}",
        tokens.body
    );
    let text = post_json(
        &format!("{base}/detokenize"),
        &serde_json::json!({"tokens": ids}),
    )
    .await;
    assert_eq!(text.status, 200, "{}", text.body);
    assert!(
        text.json()["content"]
            .as_str()
            .unwrap()
            .contains("Hello world")
    );

    // A prompt past every engine's context (2048 tokens a slot) is refused by the gateway
    // with OpenAI's code, without reaching an engine.
    let huge = "word ".repeat(5000);
    let reply = post_json(&url, &chat_body(&huge, 4, false)).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(
        reply.json()["error"]["code"],
        "context_length_exceeded",
        "{}",
        reply.body
    );
    // One the gateway lets through (its estimate is low) but the engine refuses: the engine's
    // 400 comes back in OpenAI's shape, not retried on the other engine.
    let long = "Paris, London, Rome. ".repeat(400);
    let reply = post_json(&url, &chat_body(&long, 4, false)).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let error = &reply.json()["error"];
    assert_eq!(error["code"], "context_length_exceeded", "{}", reply.body);
    assert_eq!(error["type"], "invalid_request_error", "{}", reply.body);
    assert!(error["message"].as_str().unwrap().contains("context"));

    // A client that goes away mid-stream frees the engine's slot.
    cancellation_frees_the_slot(&base, &a, &b).await;

    // One engine SIGKILLed under a stream of requests: no client sees an error, and the
    // gateway takes it out within a few health checks.
    let client_url = url.clone();
    let load = tokio::spawn(async move {
        let mut statuses = Vec::new();
        for i in 0..24 {
            let reply =
                post_json(&client_url, &chat_body(&format!("Count to {i}."), 4, false)).await;
            statuses.push((
                reply.status.as_u16(),
                reply.header("x-switchyard-worker").map(str::to_string),
            ));
        }
        statuses
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed_at = Instant::now();
    b.kill().await;
    let out = eventually(Duration::from_secs(10), || async {
        workers(&base)
            .await
            .iter()
            .any(|w| w["name"] == "llama-b" && w["healthy"] == false)
    })
    .await;
    let failover = killed_at.elapsed();
    assert!(out, "the killed engine is taken out");
    let statuses = load.await.unwrap();
    let failed: Vec<_> = statuses.iter().filter(|(s, _)| *s != 200).collect();
    assert!(
        failed.is_empty(),
        "requests failed around the kill: {statuses:?}"
    );
    assert!(
        statuses
            .iter()
            .rev()
            .take(4)
            .all(|(_, w)| w.as_deref() == Some("llama-a"))
    );
    eprintln!(
        "killed engine taken out after {failover:?}; {} requests, none failed",
        statuses.len()
    );
    gateway.shutdown().await;
}

async fn cancellation_frees_the_slot(base: &str, a: &LlamaServer, b: &LlamaServer) {
    let before = both(a, b, "llamacpp:tokens_predicted_total").await;
    let response = open(
        Method::POST,
        &format!("{base}/v1/chat/completions"),
        &[("content-type", "application/json")],
        chat_body("Write a very long story about a dragon.", 1500, true).to_string(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let mut frames = 0;
    while frames < 3 {
        body.frame().await.unwrap().unwrap();
        frames += 1;
    }
    assert_eq!(
        both(a, b, "llamacpp:requests_processing").await,
        1.0,
        "the stream is being generated"
    );
    drop(body);
    let dropped_at = Instant::now();
    let freed = eventually(Duration::from_secs(10), || async {
        both(a, b, "llamacpp:requests_processing").await == 0.0
    })
    .await;
    assert!(
        freed,
        "the engine's slot is still busy after the client left"
    );
    // Counters are updated when a task ends: the generation stopped far short of 1500.
    let generated = both(a, b, "llamacpp:tokens_predicted_total").await - before;
    assert!(
        generated < 500.0,
        "{generated} tokens generated after the client left"
    );
    eprintln!(
        "slot freed {:?} after the client disconnected ({generated} tokens generated)",
        dropped_at.elapsed()
    );
}

/// A metric summed over both engines.
async fn both(a: &LlamaServer, b: &LlamaServer, name: &str) -> f64 {
    a.metric(name).await.unwrap() + b.metric(name).await.unwrap()
}
