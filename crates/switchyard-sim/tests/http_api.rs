//! OpenAI endpoints, discovery, headers and metrics over real sockets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use http::StatusCode;
use serde_json::{Value, json};
use switchyard_sim::SimConfig;
use tokio::time::Instant;

#[tokio::test]
async fn chat_non_streaming_answers_with_usage_and_headers() {
    let worker = start(fast_config()).await;
    let client = client();
    let mut request = post(
        &format!("{}/v1/chat/completions", worker.base_url()),
        &json!({"model": "sim-llama", "messages": [{"role": "user", "content": "hello there"}],
                "max_tokens": 5}),
    );
    request
        .headers_mut()
        .insert("x-request-id", "req-42".parse().unwrap());
    let (status, headers, body) = send(&client, request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-sim-worker"], "sim-0");
    assert_eq!(headers["x-request-id"], "req-42");
    let body: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "sim-llama");
    assert_eq!(body["choices"][0]["message"]["role"], "assistant");
    let text = body["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(text.split_whitespace().count(), 5);
    assert_eq!(body["choices"][0]["finish_reason"], "length");
    // "<|user|> hello there" is three tokens.
    assert_eq!(body["usage"]["prompt_tokens"], 3);
    assert_eq!(body["usage"]["completion_tokens"], 5);
    assert_eq!(body["usage"]["total_tokens"], 8);
    assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    let stats = worker.stats();
    assert_eq!((stats.requests_received, stats.requests_completed), (1, 1));
    assert_eq!(stats.generation_tokens, 5);
}

#[tokio::test]
async fn completions_default_length_and_prompt_array() {
    let config = SimConfig {
        default_max_tokens: 4,
        ..fast_config()
    };
    let worker = start(config).await;
    let client = client();
    let url = format!("{}/v1/completions", worker.base_url());
    let (status, body) = send_json(
        &client,
        post(
            &url,
            &json!({"model": "sim-llama", "prompt": ["one two", "three"]}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["object"], "text_completion");
    let text = body["choices"][0]["text"].as_str().unwrap();
    assert_eq!(text.split_whitespace().count(), 4);
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(body["usage"]["prompt_tokens"], 3);

    // Same prompt, same words: output is deterministic.
    let (_, again) = send_json(
        &client,
        post(
            &url,
            &json!({"model": "sim-llama", "prompt": "one two three"}),
        ),
    )
    .await;
    assert_eq!(again["choices"][0]["text"], body["choices"][0]["text"]);
}

#[tokio::test]
async fn streaming_chunks_arrive_while_generating() {
    let config = SimConfig {
        time_scale: 1.0,
        decode_ms_per_token: 10.0,
        ..SimConfig::default()
    };
    let worker = start(config).await;
    let client = client();
    let url = format!("{}/v1/chat/completions", worker.base_url());
    let response = client
        .request(post(&url, &chat_body("stream please", 20, true)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let events = read_sse(response).await;
    // 20 tokens, the finish chunk, the usage chunk, [DONE].
    assert_eq!(events.len(), 23);
    assert_eq!(events.last().unwrap().data, "[DONE]");
    let first: Value = serde_json::from_str(&events[0].data).unwrap();
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    let text: String = events[..20]
        .iter()
        .map(|event| {
            let chunk: Value = serde_json::from_str(&event.data).unwrap();
            chunk["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(text.split_whitespace().count(), 20);
    // 19 decode steps of 10 ms separate the first token from the last: the first
    // chunk must have been delivered well before generation ended.
    let spread = events[19].at - events[0].at;
    assert!(spread >= Duration::from_millis(150), "spread {spread:?}");
    let finish: Value = serde_json::from_str(&events[20].data).unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "length");
    let usage: Value = serde_json::from_str(&events[21].data).unwrap();
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["completion_tokens"], 20);
}

#[tokio::test]
async fn shared_prefix_is_reported_as_cached_tokens() {
    let worker = start(fast_config()).await;
    let client = client();
    let url = format!("{}/v1/completions", worker.base_url());
    let prefix: Vec<String> = (0..40).map(|i| format!("ctx{i}")).collect();
    let prefix = prefix.join(" ");
    let body = |tail: &str| {
        json!({"model": "sim-llama", "prompt": format!("{prefix} {tail}"), "max_tokens": 2,
               "stream": true, "stream_options": {"include_usage": true}})
    };
    let mut cached = Vec::new();
    for tail in ["first question", "another question entirely"] {
        let response = client.request(post(&url, &body(tail))).await.unwrap();
        let events = read_sse(response).await;
        let usage: Value = serde_json::from_str(&events[events.len() - 2].data).unwrap();
        assert_eq!(usage["choices"], json!([]));
        cached.push(usage["usage"]["prompt_tokens_details"]["cached_tokens"].clone());
    }
    // 40 shared words = 2 full blocks; the second request reuses both.
    assert_eq!(cached, vec![json!(0), json!(32)]);
    assert_eq!(worker.stats().cached_tokens, 32);
}

#[test]
fn worker_handle_can_be_shared_across_tasks() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<switchyard_sim::SimWorker>();
}

#[tokio::test]
async fn discovery_and_health_endpoints() {
    let worker = start(fast_config()).await;
    let client = client();
    let base = worker.base_url();
    let (status, models) = send_json(&client, get(&format!("{base}/v1/models"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        models,
        json!({"object": "list", "data": [{"id": "sim-llama", "object": "model",
                                           "owned_by": "switchyard-sim"}]})
    );
    let (status, health) = send_json(&client, get(&format!("{base}/health"))).await;
    assert_eq!((status, health), (StatusCode::OK, json!({"status": "ok"})));
    let (_, info) = send_json(&client, get(&format!("{base}/get_model_info"))).await;
    assert_eq!(info["model_path"], "sim-llama");
    let (status, server) = send_json(&client, get(&format!("{base}/get_server_info"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(server["max_running_requests"], 8);
}

#[tokio::test]
async fn invalid_requests_get_openai_errors() {
    let worker = start(fast_config()).await;
    let client = client();
    let chat = format!("{}/v1/chat/completions", worker.base_url());
    let raw = http::Request::post(&chat)
        .body(http_body_util::Full::new(bytes::Bytes::from_static(
            b"{oops",
        )))
        .unwrap();
    let (status, body) = send_json(&client, raw).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    for bad in [
        json!({"messages": [{"role": "user", "content": "x"}]}),
        json!({"model": "sim-llama"}),
    ] {
        let (status, body) = send_json(&client, post(&chat, &bad)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(body["error"]["message"].is_string());
    }
    let completions = format!("{}/v1/completions", worker.base_url());
    let (status, _) = send_json(&client, post(&completions, &json!({"model": "sim-llama"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, body) = send_json(
        &client,
        post(&completions, &json!({"model": "gpt-9", "prompt": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "model_not_found");
    assert_eq!(worker.stats().requests_received, 0);
}

#[tokio::test]
async fn metrics_use_vllm_names_and_move() {
    let worker = start(fast_config()).await;
    let client = client();
    let base = worker.base_url();
    let before = metrics_text(&client, &base).await;
    for name in [
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_per_output_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prompt_tokens_total",
        "vllm:generation_tokens_total",
        "vllm:request_success_total",
    ] {
        assert!(before.contains(&format!("{name}{{")), "missing {name}");
    }
    let label = r#"{model_name="sim-llama"}"#;
    assert_eq!(
        metric(&before, &format!("vllm:request_success_total{label}")),
        0.0
    );

    let prompt: Vec<String> = (0..48).map(|i| format!("w{i}")).collect();
    let url = format!("{base}/v1/completions");
    let started = Instant::now();
    for _ in 0..2 {
        let body = json!({"model": "sim-llama", "prompt": prompt.join(" "), "max_tokens": 3});
        assert_eq!(
            send_json(&client, post(&url, &body)).await.0,
            StatusCode::OK
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    let after = metrics_text(&client, &base).await;
    let value = |name: &str| metric(&after, &format!("{name}{label}"));
    assert_eq!(value("vllm:request_success_total"), 2.0);
    assert_eq!(value("vllm:prompt_tokens_total"), 96.0);
    assert_eq!(value("vllm:generation_tokens_total"), 6.0);
    assert_eq!(value("vllm:prefix_cache_queries_total"), 96.0);
    assert_eq!(value("vllm:prefix_cache_hits_total"), 48.0);
    assert_eq!(value("vllm:time_to_first_token_seconds_count"), 2.0);
    assert_eq!(value("vllm:time_per_output_token_seconds_count"), 4.0);
    assert_eq!(value("vllm:e2e_request_latency_seconds_count"), 2.0);
    assert_eq!(value("vllm:num_requests_running"), 0.0);
    // Latencies are wall-clock seconds as the client saw them.
    let e2e_sum = value("vllm:e2e_request_latency_seconds_sum");
    assert!(
        e2e_sum > 0.0 && e2e_sum <= elapsed,
        "{e2e_sum} vs {elapsed}"
    );
    // 3 cached blocks of 4096.
    let usage = value("vllm:kv_cache_usage_perc");
    assert!((usage - 3.0 / 4096.0).abs() < 1e-9, "usage {usage}");
}
