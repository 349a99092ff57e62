#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The real `switchyard` binary in front of simulated workers, over loopback.

mod common;

use common::*;
use http::Method;
use http_body_util::BodyExt;
use std::time::Duration;

#[tokio::test]
async fn non_streaming_chat_and_completion_pass_through_with_worker_and_request_id() {
    let sims = start_sims(2).await;
    let urls: Vec<String> = sims
        .iter()
        .map(|s| format!("{}={}", s.name(), s.base_url()))
        .collect();
    let mut args = vec!["--policy", "round_robin"];
    for url in &urls {
        args.extend(["--worker-url", url.as_str()]);
    }
    let gateway = GatewayProcess::spawn(&args).await;

    let reply = send(
        Method::POST,
        &format!("{}/v1/chat/completions", gateway.base_url),
        &[
            ("content-type", "application/json"),
            ("x-request-id", "req-42"),
        ],
        chat("sim-llama", "hello there", false).to_string(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("x-request-id"), Some("req-42"));
    let worker = reply.header("x-switchyard-worker").unwrap().to_string();
    assert!(worker.starts_with("sim-"), "{worker}");
    let body = reply.json();
    assert_eq!(body["usage"]["completion_tokens"], 8);
    assert!(
        !body["choices"][0]["message"]["content"]
            .as_str()
            .unwrap()
            .is_empty()
    );

    let completion = post_json(
        &format!("{}/v1/completions", gateway.base_url),
        &serde_json::json!({"model": "sim-llama", "prompt": "once upon a time", "max_tokens": 4}),
    )
    .await;
    assert_eq!(completion.status, 200, "{}", completion.body);
    assert!(
        completion.header("x-request-id").unwrap().len() >= 32,
        "a fresh uuid"
    );
    assert_eq!(completion.json()["usage"]["completion_tokens"], 4);
}

#[tokio::test]
async fn streaming_is_passed_through_chunk_by_chunk() {
    let sims = start_sims(1).await;
    let url = sims[0].base_url();
    let gateway = GatewayProcess::spawn(&["--worker-url", &url]).await;

    let mut request = chat("sim-llama", "tell me a story", true);
    request["max_tokens"] = 40.into();
    let response = open_chat(&gateway.base_url, &request).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut body = response.into_body();
    let mut frames = 0;
    let mut text = String::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        if let Some(data) = frame.data_ref() {
            frames += 1;
            text.push_str(&String::from_utf8_lossy(data));
        }
    }
    // 40 tokens at several ms each arrive as many separate frames, not one buffered blob.
    assert!(
        frames >= 10,
        "only {frames} frames: the stream was buffered"
    );
    assert!(text.trim_end().ends_with("data: [DONE]"));
    let usage_line = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter(|l| *l != "[DONE]")
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v.get("usage").is_some_and(|u| !u.is_null()))
        .expect("usage chunk");
    assert_eq!(usage_line["usage"]["completion_tokens"], 40);
}

#[tokio::test]
async fn client_disconnect_mid_stream_cancels_the_upstream_request() {
    let sims = start_sims(1).await;
    let gateway = GatewayProcess::spawn(&["--worker-url", &sims[0].base_url()]).await;

    let mut request = chat("sim-llama", "a very long answer please", true);
    request["max_tokens"] = 2000.into();
    let response = open_chat(&gateway.base_url, &request).await;
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap();
    assert!(first.data_ref().is_some());
    assert_eq!(sims[0].stats().running, 1);
    drop(body);

    let cancelled = eventually(Duration::from_secs(5), || async {
        let stats = sims[0].stats();
        stats.requests_cancelled == 1 && stats.running == 0
    })
    .await;
    assert!(
        cancelled,
        "worker never saw the cancellation: {:?}",
        sims[0].stats()
    );
    assert_eq!(sims[0].stats().requests_completed, 0);
}

#[tokio::test]
async fn bad_config_fails_at_start_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[routing.cache_aware]\nmatch_treshold = 0.5\n").unwrap();
    let (code, stderr) = run_to_exit(&["serve", "--config", path.to_str().unwrap()]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("routing.cache_aware.match_treshold"),
        "{stderr}"
    );

    std::fs::write(&path, "[upstream]\nconnect_timeout_ms = 0\n").unwrap();
    let (code, stderr) = run_to_exit(&["serve", "--config", path.to_str().unwrap()]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("upstream.connect_timeout_ms"), "{stderr}");

    let (code, stderr) = run_to_exit(&["serve", "--policy", "random"]).await;
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--policy") && stderr.contains("cache_aware"),
        "{stderr}"
    );

    let (code, stderr) = run_to_exit(&["serve", "--worker-url", "ftp://x"]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("--worker-url"), "{stderr}");

    let (code, stderr) = run_to_exit(&["serve", "--config", "/nonexistent/switchyard.toml"]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("/nonexistent/switchyard.toml"), "{stderr}");
}
