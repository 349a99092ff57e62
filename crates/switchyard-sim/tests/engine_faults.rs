//! Faults of a stuck engine behind a healthy HTTP server: engine hang, stall after N
//! chunks, slow trickle.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::*;
use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::json;
use switchyard_sim::{Fault, SimConfig};
use tokio::time::Instant;

fn chat_url(base: &str) -> String {
    format!("{base}/v1/chat/completions")
}

#[tokio::test]
async fn engine_hang_keeps_health_but_sends_no_byte_and_resumes_when_cleared() {
    let worker = start(fast_config()).await;
    let client = client();
    let base = worker.base_url();
    let (status, shown) = send_json(
        &client,
        post(
            &format!("{base}/admin/fault"),
            &json!({"mode": "engine_hang"}),
        ),
    )
    .await;
    assert_eq!(
        (status, shown),
        (StatusCode::OK, json!({"mode": "engine_hang"}))
    );

    let (status, _, _) = send(&client, get(&format!("{base}/health"))).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "health stays 200 while the engine hangs"
    );
    let (status, _, _) = send(&client, get(&format!("{base}/v1/models"))).await;
    assert_eq!(status, StatusCode::OK);

    for stream in [false, true] {
        let pending = client.request(post(&chat_url(&base), &chat_body("x", 3, stream)));
        let outcome = tokio::time::timeout(Duration::from_millis(300), pending).await;
        assert!(outcome.is_err(), "no response headers (stream {stream})");
    }

    // A request held by the hang completes once the engine is back.
    let held = tokio::spawn({
        let client = client.clone();
        let url = chat_url(&base);
        async move { send_json(&client, post(&url, &chat_body("x", 3, false))).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!held.is_finished());
    worker.set_fault(Fault::Ok);
    let (status, body) = tokio::time::timeout(Duration::from_secs(5), held)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["usage"]["completion_tokens"], 3);
}

#[tokio::test]
async fn engine_hang_freezes_streams_already_generating() {
    let config = SimConfig {
        decode_ms_per_token: 10.0,
        ..SimConfig::default()
    };
    let worker = start(config).await;
    let client = client();
    let response = client
        .request(post(
            &chat_url(&worker.base_url()),
            &chat_body("x", 200, true),
        ))
        .await
        .unwrap();
    let mut body = response.into_body();
    // First token arrives, then the engine hangs.
    let first = body.frame().await.unwrap().unwrap();
    assert!(first.data_ref().is_some());
    worker.set_fault(Fault::EngineHang);
    let tokens_at_hang = worker.stats().generation_tokens;
    // At most the token being decoded when the fault landed still comes out.
    let drained = tokio::time::timeout(Duration::from_millis(100), async {
        while body.frame().await.is_some() {}
    })
    .await;
    assert!(drained.is_err(), "the stream must stay open and silent");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(worker.stats().generation_tokens <= tokens_at_hang + 1);
}

/// Token chunks (`data:` events other than `[DONE]` and the usage chunk) in SSE text.
fn token_chunks(text: &str) -> usize {
    text.split("\n\n")
        .filter(|event| event.starts_with("data: {") && event.contains("\"delta\""))
        .count()
}

#[tokio::test]
async fn stall_sends_n_chunks_then_keeps_the_stream_open_and_silent() {
    let worker = start(fast_config()).await;
    worker.set_fault(Fault::Stall { after_chunks: 3 });
    let client = client();
    let response = client
        .request(post(
            &chat_url(&worker.base_url()),
            &chat_body("x", 50, true),
        ))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut text = String::new();
    let read = tokio::time::timeout(Duration::from_millis(500), async {
        while let Some(Ok(frame)) = body.frame().await {
            if let Some(data) = frame.data_ref() {
                text.push_str(&String::from_utf8_lossy(data));
            }
        }
    })
    .await;
    assert!(read.is_err(), "the stream never ends while stalled");
    assert_eq!(token_chunks(&text), 3, "{text}");
    assert!(!text.contains("[DONE]"));
}

#[tokio::test]
async fn trickle_paces_every_token_after_the_first() {
    let worker = start(fast_config()).await;
    worker.set_fault(Fault::Trickle {
        chunk_interval_ms: 100,
    });
    let client = client();
    let started = Instant::now();
    let (status, body) = send_json(
        &client,
        post(&chat_url(&worker.base_url()), &chat_body("x", 4, false)),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["usage"]["completion_tokens"], 4);
    // Three paced tokens after the first.
    assert!(started.elapsed() >= Duration::from_millis(300));
}

#[tokio::test]
async fn a_zero_trickle_is_refused() {
    let worker = start(fast_config()).await;
    let client = client();
    let (status, body) = send_json(
        &client,
        post(
            &format!("{}/admin/fault", worker.base_url()),
            &json!({"mode": "trickle", "chunk_interval_ms": 0}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body["error"]["message"].is_string());
}
