#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Degradation per request, through the running gateway: the gateway-wide level follows the
//! fleet's budget (not the busiest tenant's), a tenant past its own limit degrades only its
//! own requests, and streaming requests get cached answers as SSE — filled from streamed
//! answers too.

mod common;
mod warmup_support;

use common::*;
use http::Method;
use serde_json::{Value, json};
use std::time::Duration;
use warmup_support::{admin, chain, chat_as, chat_body, start, with_tenants};

#[tokio::test]
async fn one_tenant_at_its_limit_degrades_alone_and_a_spent_fleet_degrades_everyone() {
    // Every answer reports 960 + 10 = 970 tokens: 97 % of a 1000-token day at once.
    let worker = CaptureWorker::start((960, 10)).await;
    let config = with_tenants(
        worker.config(),
        json!([
            {"api_key": "sk-hot", "caller": "hot", "tokens_per_day": 1000},
            {"api_key": "sk-big", "caller": "big", "tokens_per_day": 1000},
            {"api_key": "sk-free", "caller": "free"},
            // Survival needs a core caller to serve (a must-succeed check).
            {"api_key": "sk-ops", "caller": "ops", "core": true},
        ]),
    );
    let (gateway, _clock) = start(config).await;
    let base = gateway.base_url();
    let state = gateway.state().clone();
    let level = || state.warmup.view.load().level.as_u8();
    let ask = |key: &'static str, prompt: &'static str| {
        let base = base.clone();
        async move { chat_as(&base, Some(key), &[], &chat_body("sim-llama", None, prompt)).await }
    };

    assert_eq!(ask("sk-hot", "first question").await.status, 200);
    switchyard_gateway::warmup::evaluate_once(&state.stack, &state.warmup).await;
    assert_eq!(
        level(),
        0,
        "hot at 97 % of its own budget, the fleet at 48.5 %"
    );
    let free = ask("sk-free", "another tenant").await;
    assert_eq!(
        free.status, 200,
        "another tenant is served as usual: {}",
        free.body
    );
    assert_eq!(free.header("x-switchyard-degraded"), None);

    let repeat = ask("sk-hot", "first question").await;
    assert_eq!(repeat.status, 200, "{}", repeat.body);
    assert_eq!(
        repeat.header("x-switchyard-degraded"),
        Some("cache"),
        "past its own hard limit, the tenant gets what the cache can answer"
    );
    let fresh = ask("sk-hot", "a new question").await;
    assert_eq!(
        fresh.status, 429,
        "and otherwise its own budget gate's 429, not the gateway's 503: {}",
        fresh.body
    );

    assert_eq!(ask("sk-big", "big question").await.status, 200);
    switchyard_gateway::warmup::evaluate_once(&state.stack, &state.warmup).await;
    assert_eq!(level(), 3, "the fleet at 97 %: survival");
    let refused = ask("sk-free", "after the fleet ran out").await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.error_code(), "degraded_unavailable");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_tenant_past_its_limit_is_never_served_another_tenants_or_other_parameters_cached_answer()
{
    // Every answer reports 970 tokens: one answer takes `hot` to 97 % of its 1000-token day.
    let worker = CaptureWorker::start((960, 10)).await;
    let config = with_tenants(
        worker.config(),
        json!([
            {"api_key": "sk-hot", "caller": "hot", "tokens_per_day": 1000},
            {"api_key": "sk-free", "caller": "free"},
        ]),
    );
    let (gateway, _clock) = start(config).await;
    let base = gateway.base_url();
    let ask = |key: &'static str, body: Value| {
        let base = base.clone();
        async move { chat_as(&base, Some(key), &[], &body).await }
    };
    let shared = chat_body("sim-llama", None, "a question both tenants ask");
    assert_eq!(ask("sk-free", shared.clone()).await.status, 200);
    let own = chat_body("sim-llama", None, "hot's own question");
    assert_eq!(ask("sk-hot", own.clone()).await.status, 200);

    // Past its hard limit `hot` gets what the cache holds for it, and only that.
    let repeat = ask("sk-hot", own.clone()).await;
    assert_eq!(repeat.header("x-switchyard-degraded"), Some("cache"));
    let theirs = ask("sk-hot", shared).await;
    assert_eq!(
        theirs.status, 429,
        "another tenant's cached answer must not be served: {}",
        theirs.body
    );
    assert_eq!(theirs.header("x-switchyard-degraded"), None);
    let mut hotter = own;
    hotter["temperature"] = json!(1.7);
    let sampled = ask("sk-hot", hotter).await;
    assert_eq!(
        sampled.status, 429,
        "an answer generated with other sampling parameters is not this request's: {}",
        sampled.body
    );
    gateway.shutdown().await;
}

/// The text of an SSE chat answer: its deltas' content, in order.
fn streamed_text(body: &str) -> String {
    body.split("\n\n")
        .filter_map(|frame| frame.trim().strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter_map(|chunk| {
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

#[tokio::test]
async fn streamed_answers_fill_the_cache_and_streaming_requests_get_it_back_as_sse() {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.degradation.chains = vec![chain("flagship", &["sim-llama"])];
    let (gateway, clock) = start(config).await;
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");
    let stream = |content: &str| {
        let mut body = chat("flagship", content, true);
        body["max_tokens"] = json!(6);
        body
    };
    let first = post_json(&url, &stream("Explain TCP slow start.")).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(first.body.trim_end().ends_with("data: [DONE]"));
    let text = streamed_text(&first.body);
    assert!(!text.is_empty(), "{}", first.body);
    let cache = gateway.state().warmup.cache.clone();
    assert!(
        eventually(Duration::from_secs(5), || {
            let cache = cache.clone();
            async move { cache.len() == 1 }
        })
        .await,
        "the streamed answer was assembled into the cache"
    );

    let removed = admin(
        Method::DELETE,
        &base,
        "/admin/workers/sim-0?wait=true",
        Value::Null,
    )
    .await;
    assert_eq!(removed.status, 200, "{}", removed.body);
    clock.advance(Duration::from_secs(42));

    let cached = post_json(&url, &stream("Explain  TCP slow start.")).await;
    assert_eq!(cached.status, 200, "{}", cached.body);
    assert_eq!(cached.header("content-type"), Some("text/event-stream"));
    assert_eq!(cached.header("x-switchyard-degraded"), Some("cache"));
    assert_eq!(cached.header("x-switchyard-cache-age"), Some("42"));
    assert!(cached.body.ends_with("data: [DONE]\n\n"), "{}", cached.body);
    assert_eq!(
        streamed_text(&cached.body),
        text,
        "the same answer, replayed"
    );

    let plain = post_json(&url, &chat("flagship", "Explain TCP slow start.", false)).await;
    assert_eq!(plain.status, 200, "{}", plain.body);
    assert_eq!(plain.header("x-switchyard-degraded"), Some("cache"));
    assert_eq!(
        plain.json()["choices"][0]["message"]["content"],
        json!(text)
    );

    let unseen = post_json(&url, &stream("Never asked.")).await;
    assert_eq!(unseen.status, 503);
    assert_eq!(unseen.error_code(), "degraded_unavailable");
    gateway.shutdown().await;
}
