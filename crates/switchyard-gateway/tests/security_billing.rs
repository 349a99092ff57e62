#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Billing cannot be bypassed: a stream whose client did not ask for usage is charged what the
//! worker generated (and the client does not see the usage chunk it did not ask for), and
//! `max_tokens` beyond the cap — `2^64-1` included — is a 400 before anything is reserved.

mod common;

use common::*;
use http::Method;
use serde_json::{Value, json};
use switchyard_sim::{SimConfig, SimWorker};

const KEY: &str = "sk-billing-tenant-0001";
const ANSWER_TOKENS: u64 = 1500;

async fn long_answer_sim() -> SimWorker {
    let config = SimConfig {
        name: "sim-long".into(),
        time_scale: 0.001,
        default_max_tokens: ANSWER_TOKENS as u32,
        ..SimConfig::default()
    };
    SimWorker::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

async fn gateway(sims: &[SimWorker]) -> switchyard_gateway::GatewayHandle {
    let mut config = config_for(sims, "round_robin");
    config.admission =
        serde_json::from_value(json!({"tenants": [{"api_key": KEY, "caller": "team-a"}]})).unwrap();
    config.limits.max_output_tokens = 4096;
    switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap()
}

async fn settled_tokens(base: &str) -> u64 {
    let metrics = send(Method::GET, &format!("{base}/metrics"), &[], "").await;
    metrics
        .body
        .lines()
        .find_map(|line| line.strip_prefix("switchyard_warmup_traffic_tokens_total "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

#[tokio::test]
async fn a_stream_without_include_usage_is_charged_what_the_worker_generated() {
    let sims = vec![long_answer_sim().await];
    let gateway = gateway(&sims).await;
    let base = gateway.base_url();
    let request = json!({
        "model": "sim-llama",
        "stream": true,
        "messages": [{"role": "user", "content": "tell me a long story"}],
    });
    let reply = send(
        Method::POST,
        &format!("{base}/v1/chat/completions"),
        &[("authorization", &format!("Bearer {KEY}"))],
        request.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let events: Vec<Value> = reply
        .body
        .split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    assert!(
        events.len() as u64 >= ANSWER_TOKENS,
        "{} events",
        events.len()
    );
    assert!(
        events.iter().all(|e| !e["usage"].is_object()),
        "the client did not ask for usage and gets none"
    );
    assert!(
        reply.body.ends_with("data: [DONE]\n\n"),
        "{}",
        &reply.body[reply.body.len() - 200..]
    );
    let charged = settled_tokens(&base).await;
    assert!(
        charged >= ANSWER_TOKENS,
        "charged {charged} tokens for a {ANSWER_TOKENS}-token answer"
    );
    assert!(charged < ANSWER_TOKENS + 100, "charged {charged}");
}

#[tokio::test]
async fn a_client_that_asked_for_usage_still_gets_it() {
    let sims = vec![long_answer_sim().await];
    let gateway = gateway(&sims).await;
    let mut request = chat("sim-llama", "hi", true);
    request["max_tokens"] = json!(5);
    let reply = send(
        Method::POST,
        &format!("{}/v1/chat/completions", gateway.base_url()),
        &[("authorization", &format!("Bearer {KEY}"))],
        request.to_string(),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(reply.body.contains("\"usage\""), "{}", reply.body);
}

#[tokio::test]
async fn max_tokens_beyond_the_cap_is_a_400_and_reaches_no_worker() {
    let worker = CaptureWorker::start((1, 1)).await;
    let mut config = worker.config();
    config.limits.max_output_tokens = 4096;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    for (field, value) in [
        ("max_tokens", json!(u64::MAX)),
        ("max_tokens", json!(4097)),
        ("max_completion_tokens", json!(u64::MAX)),
    ] {
        let mut request = chat("sim-llama", "hi", false);
        request.as_object_mut().unwrap().remove("max_tokens");
        request[field] = value.clone();
        let reply = post_json(&url, &request).await;
        assert_eq!(reply.status, 400, "{field}={value}: {}", reply.body);
        assert_eq!(reply.error_code(), "max_tokens_too_large");
        assert_eq!(reply.json()["error"]["type"], "invalid_request_error");
    }
    let completion = post_json(
        &format!("{}/v1/completions", gateway.base_url()),
        &json!({"model": "sim-llama", "prompt": "x", "max_tokens": u64::MAX}),
    )
    .await;
    assert_eq!(completion.status, 400, "{}", completion.body);
    assert!(
        worker.heads.lock().iter().all(|h| !h.starts_with("post")),
        "nothing was forwarded"
    );
    let mut fine = chat("sim-llama", "hi", false);
    fine["max_tokens"] = json!(4096);
    let reply = post_json(&url, &fine).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
}

/// A worker whose `/v1/models` states a 2048-token context, answering chats with a fixed body.
async fn small_context_worker() -> (String, tokio::task::JoinHandle<()>) {
    use axum::routing::{get, post};
    let app = axum::Router::new()
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(json!({"object": "list", "data": [
                    {"id": "small", "object": "model", "max_model_len": 2048}
                ]}))
            }),
        )
        .route("/health", get(|| async { "ok" }))
        .route(
            "/v1/chat/completions",
            post(|| async {
                axum::Json(json!({"id": "c", "object": "chat.completion", "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": "ok"}}
                ], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}))
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, task)
}

#[tokio::test]
async fn max_tokens_beyond_the_models_context_is_a_400() {
    let (url, task) = small_context_worker().await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![switchyard_workers::WorkerSpec {
        name: "small".into(),
        url,
        models: None,
        health_path: None,
        engine: None,
    }];
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let chat_url = format!("{}/v1/chat/completions", gateway.base_url());
    let ask = |max_tokens: u64| {
        let mut request = chat("small", "hi", false);
        request["max_tokens"] = json!(max_tokens);
        let url = chat_url.clone();
        async move { post_json(&url, &request).await }
    };
    assert!(
        eventually(std::time::Duration::from_secs(10), || async {
            ask(2000).await.status == 200
        })
        .await,
        "the model is discovered and served"
    );
    let reply = ask(2049).await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    assert_eq!(reply.error_code(), "max_tokens_too_large");
    gateway.shutdown().await;
    task.abort();
}
