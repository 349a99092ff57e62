#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The admission layer through the gateway: identity and tags, budgets settled on real
//! usage, refusals with the right status and Retry-After.

mod common;

use common::*;
use http::Method;
use switchyard_core::Priority;
use switchyard_gateway::Config;
use switchyard_gateway::config::AdmissionConfig;

fn tenant(
    key: &str,
    caller: &str,
    max: Priority,
    tokens_per_day: Option<u64>,
) -> serde_json::Value {
    serde_json::json!({
        "api_key": key, "caller": caller, "max_priority": max.as_str(),
        "tokens_per_day": tokens_per_day,
    })
}

fn with_tenants(mut config: Config, tenants: Vec<serde_json::Value>) -> Config {
    let admission: AdmissionConfig =
        serde_json::from_value(serde_json::json!({ "tenants": tenants })).unwrap();
    config.admission = admission;
    config
}

#[tokio::test]
async fn unknown_callers_get_401_before_their_body_is_read_and_tags_reach_the_worker() {
    let worker = CaptureWorker::start((10, 5)).await;
    let mut config = worker.config();
    config.server.max_body_bytes = 1024;
    let config = with_tenants(config, vec![tenant("sk-a", "team-a", Priority::P1, None)]);
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());

    let huge = chat("sim-llama", &"x ".repeat(5000), false).to_string();
    let reply = send(
        Method::POST,
        &url,
        &[("content-type", "application/json")],
        huge,
    )
    .await;
    assert_eq!(
        reply.status, 401,
        "identity is checked before the body: {}",
        reply.body
    );
    assert_eq!(reply.json()["error"]["type"], "authentication_error");
    let reply = send(
        Method::POST,
        &url,
        &[("authorization", "Bearer sk-wrong")],
        chat("sim-llama", "hi", false).to_string(),
    )
    .await;
    assert_eq!(reply.status, 401);
    let reply = send(
        Method::POST,
        &url,
        &[
            ("authorization", "Bearer sk-a"),
            ("x-switchyard-purpose", "retry"),
        ],
        chat("sim-llama", "hi", false).to_string(),
    )
    .await;
    assert_eq!(reply.status, 403, "clients cannot claim the retry purpose");
    assert!(worker.heads.lock().iter().all(|h| !h.starts_with("post")));

    let reply = send(
        Method::POST,
        &url,
        &[
            ("authorization", "Bearer sk-a"),
            ("x-switchyard-priority", "P0"),
        ],
        chat("sim-llama", "hi", false).to_string(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let heads = worker.heads.lock().clone();
    let post = heads
        .iter()
        .find(|h| h.starts_with("post"))
        .expect("forwarded request");
    assert!(post.contains("x-switchyard-caller: team-a"), "{post}");
    assert!(
        post.contains("x-switchyard-priority: p1"),
        "P0 clamped to the caller's P1: {post}"
    );
    assert!(post.contains("x-switchyard-purpose: business"), "{post}");
    assert!(
        !post.contains("sk-a"),
        "the caller's key is not forwarded: {post}"
    );
}

#[tokio::test]
async fn the_budget_is_spent_by_real_usage_and_refused_with_429_and_retry_after() {
    // Each answer reports 400 + 200 = 600 tokens, far above the small estimate.
    let worker = CaptureWorker::start((400, 200)).await;
    let config = with_tenants(
        worker.config(),
        vec![tenant("sk-a", "team-a", Priority::P1, Some(1000))],
    );
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    // Distinct prompts: past its hard limit a tenant is first offered a cached answer.
    let ask = |prompt: &str| {
        send(
            Method::POST,
            &url,
            &[("authorization", "Bearer sk-a")],
            chat("sim-llama", prompt, false).to_string(),
        )
    };
    assert_eq!(ask("hi").await.status, 200);
    // 600 of 1000 spent: the next request's estimate pushes the level past the soft limit
    // (80 %) only for P2/warmup; P1 passes until the hard limit.
    let second = ask("hello").await;
    assert_eq!(second.status, 200, "{}", second.body);
    let third = ask("hey").await;
    assert_eq!(third.status, 429, "1200 of 1000 spent: {}", third.body);
    assert_eq!(third.json()["error"]["type"], "rate_limit_error");
    assert!(third.body.contains("budget"), "{}", third.body);
    let retry_after: u64 = third.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after >= 1);

    let snapshot = send(
        Method::GET,
        &format!("{}/admin/admission", gateway.base_url()),
        &[("authorization", &format!("Bearer {ADMIN_KEY}"))],
        "",
    )
    .await
    .json();
    assert_eq!(snapshot["state"], "normal", "{snapshot}");
}
