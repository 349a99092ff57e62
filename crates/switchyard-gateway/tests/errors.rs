#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every error the gateway answers, in the OpenAI shape with the right status.

mod common;

use common::*;
use http::Method;
use switchyard_sim::Fault;
use switchyard_workers::WorkerSpec;

#[tokio::test]
async fn malformed_and_incomplete_requests_are_400() {
    let sims = start_sims(1).await;
    let gateway = switchyard_gateway::start(config_for(&sims, "round_robin"), None)
        .await
        .unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());

    let reply = send(Method::POST, &url, &[], "{\"model\":").await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.error_code(), "invalid_json");
    assert_eq!(reply.json()["error"]["type"], "invalid_request_error");

    let reply = post_json(
        &url,
        &serde_json::json!({"messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("model")
    );

    let reply = post_json(
        &url,
        &serde_json::json!({"model": "sim-llama", "messages": []}),
    )
    .await;
    assert_eq!(reply.status, 400);

    let reply = post_json(
        &format!("{}/v1/completions", gateway.base_url()),
        &serde_json::json!({"model": "sim-llama"}),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.contains("prompt"));
    assert_eq!(
        sims[0].stats().requests_received,
        0,
        "bad requests never reach a worker"
    );
}

#[tokio::test]
async fn oversized_body_is_413_by_length_and_by_stream() {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.server.max_body_bytes = 1024;
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let big = chat("sim-llama", &"word ".repeat(1000), false);
    let reply = post_json(&format!("{}/v1/chat/completions", gateway.base_url()), &big).await;
    assert_eq!(reply.status, 413);
    assert_eq!(reply.error_code(), "request_too_large");
}

#[tokio::test]
async fn unknown_model_is_404_and_unknown_route_is_404() {
    let sims = start_sims(1).await;
    let gateway = switchyard_gateway::start(config_for(&sims, "round_robin"), None)
        .await
        .unwrap();
    let base = gateway.base_url();
    // Wait for model discovery so the gateway knows what the worker serves.
    let discovered = eventually(std::time::Duration::from_secs(5), || async {
        send(Method::GET, &format!("{base}/v1/models"), &[], "")
            .await
            .body
            .contains("sim-llama")
    })
    .await;
    assert!(discovered);
    let reply = post_json(
        &format!("{base}/v1/chat/completions"),
        &chat("gpt-17", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.error_code(), "model_not_found");
    let reply = send(Method::GET, &format!("{base}/v2/nothing"), &[], "").await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.error_code(), "unknown_route");
}

#[tokio::test]
async fn no_worker_is_503_with_retry_after() {
    let mut config = config_for(&[], "cache_aware");
    config.workers.clear();
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let reply = post_json(
        &format!("{}/v1/chat/completions", gateway.base_url()),
        &chat("sim-llama", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 503);
    assert_eq!(reply.error_code(), "no_workers");
    let retry_after: u64 = reply.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after >= 1);
}

#[tokio::test]
async fn unreachable_worker_is_502() {
    // Bind then drop a listener: the port is (almost certainly) closed now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![WorkerSpec {
        name: "gone".into(),
        url: format!("http://127.0.0.1:{port}"),
        models: Some(vec!["sim-llama".into()]),
        health_path: None,
        engine: None,
    }];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let reply = post_json(
        &format!("{}/v1/chat/completions", gateway.base_url()),
        &chat("sim-llama", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 502);
    assert_eq!(reply.error_code(), "upstream_unreachable");
    assert!(reply.body.contains("gone"));
}

#[tokio::test]
async fn worker_5xx_is_502_and_names_the_worker() {
    let sims = start_sims(1).await;
    sims[0].set_fault(Fault::Error);
    let gateway = switchyard_gateway::start(config_for(&sims, "round_robin"), None)
        .await
        .unwrap();
    let reply = post_json(
        &format!("{}/v1/chat/completions", gateway.base_url()),
        &chat("sim-llama", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 502);
    assert_eq!(reply.error_code(), "upstream_error");
    assert!(
        reply.body.contains("sim-0") && reply.body.contains("500"),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn hanging_worker_is_504_after_the_request_timeout() {
    let sims = start_sims(1).await;
    sims[0].set_fault(Fault::Hang);
    let mut config = config_for(&sims, "round_robin");
    config.upstream.request_timeout_ms = 200;
    config.workers[0].models = Some(vec!["sim-llama".into()]);
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let started = std::time::Instant::now();
    let reply = post_json(
        &format!("{}/v1/chat/completions", gateway.base_url()),
        &chat("sim-llama", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 504);
    assert_eq!(reply.error_code(), "upstream_timeout");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
}

#[tokio::test]
async fn reset_connection_is_502() {
    let sims = start_sims(1).await;
    sims[0].set_fault(Fault::Reset);
    let mut config = config_for(&sims, "round_robin");
    config.workers[0].models = Some(vec!["sim-llama".into()]);
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let reply = post_json(
        &format!("{}/v1/chat/completions", gateway.base_url()),
        &chat("sim-llama", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 502, "{}", reply.body);
}
