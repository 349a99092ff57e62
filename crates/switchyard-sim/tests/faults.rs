//! Fault injection (error, slow, hang, reset, ok) and client disconnects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::ErrorKind;
use std::time::Duration;

use common::*;
use http::StatusCode;
use serde_json::{Value, json};
use switchyard_sim::{Fault, SimConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

async fn set_fault(client: &HttpClient, base: &str, fault: Value) -> (StatusCode, Value) {
    send_json(client, post(&format!("{base}/admin/fault"), &fault)).await
}

/// Time for one small chat request (11 output tokens, tiny prompt).
async fn timed_chat(client: &HttpClient, base: &str) -> (StatusCode, Duration) {
    let started = Instant::now();
    let (status, _) = send_json(
        client,
        post(
            &format!("{base}/v1/chat/completions"),
            &chat_body("hi", 11, false),
        ),
    )
    .await;
    (status, started.elapsed())
}

#[tokio::test]
async fn admin_endpoint_sets_shows_and_validates_faults() {
    let worker = start(fast_config()).await;
    let client = client();
    let base = worker.base_url();
    let (status, body) = set_fault(&client, &base, json!({"mode": "slow", "factor": 20})).await;
    assert_eq!(
        (status, body.clone()),
        (StatusCode::OK, json!({"mode": "slow", "factor": 20.0}))
    );
    let (_, shown) = send_json(&client, get(&format!("{base}/admin/fault"))).await;
    assert_eq!(shown, body);
    for bad in [
        json!({"mode": "melt"}),
        json!({"mode": "slow", "factor": -1}),
    ] {
        assert_eq!(
            set_fault(&client, &base, bad).await.0,
            StatusCode::BAD_REQUEST
        );
    }
    worker.set_fault(Fault::Hang);
    let (_, shown) = send_json(&client, get(&format!("{base}/admin/fault"))).await;
    assert_eq!(shown, json!({"mode": "hang"}));
}

#[tokio::test]
async fn error_fault_returns_500_but_spares_metrics_then_ok_recovers() {
    let worker = start(fast_config()).await;
    let client = client();
    let base = worker.base_url();
    set_fault(&client, &base, json!({"mode": "error"})).await;
    let (status, body) = send_json(
        &client,
        post(
            &format!("{base}/v1/chat/completions"),
            &chat_body("x", 2, false),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(body["error"]["message"].is_string());
    let (status, _, _) = send(&client, get(&format!("{base}/health"))).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    metrics_text(&client, &base).await;

    set_fault(&client, &base, json!({"mode": "ok"})).await;
    assert_eq!(timed_chat(&client, &base).await.0, StatusCode::OK);
    assert_eq!(worker.stats().requests_completed, 1);
}

#[tokio::test]
async fn slow_fault_multiplies_simulated_time() {
    let worker = start(SimConfig::default()).await;
    let client = client();
    let base = worker.base_url();
    // 10 decode steps x 5 ms.
    let (status, normal) = timed_chat(&client, &base).await;
    assert_eq!(status, StatusCode::OK);
    assert!(normal >= Duration::from_millis(50), "normal {normal:?}");
    worker.set_fault(Fault::Slow { factor: 10.0 });
    let (status, slow) = timed_chat(&client, &base).await;
    assert_eq!(status, StatusCode::OK);
    assert!(slow >= Duration::from_millis(500), "slow {slow:?}");
    assert!(slow > normal, "slow {slow:?} vs normal {normal:?}");
}

#[tokio::test]
async fn hang_fault_never_answers_while_control_paths_work() {
    let worker = start(fast_config()).await;
    let client = client();
    let base = worker.base_url();
    worker.set_fault(Fault::Hang);
    let pending = client.request(post(
        &format!("{base}/v1/chat/completions"),
        &chat_body("x", 2, false),
    ));
    let outcome = tokio::time::timeout(Duration::from_millis(300), pending).await;
    assert!(outcome.is_err(), "a hung worker must not answer");
    // The control plane still works while the data plane hangs.
    metrics_text(&client, &base).await;
    worker.set_fault(Fault::Ok);
    assert_eq!(timed_chat(&client, &base).await.0, StatusCode::OK);
    assert_eq!(worker.stats().running, 0);
}

#[tokio::test]
async fn reset_fault_drops_the_connection_without_a_response() {
    let worker = start(fast_config()).await;
    let client = client();
    let base = worker.base_url();
    worker.set_fault(Fault::Reset);
    let result = client
        .request(post(
            &format!("{base}/v1/chat/completions"),
            &chat_body("x", 2, false),
        ))
        .await;
    assert!(result.is_err(), "expected a connection error");

    // At the socket level the client sees an RST, not an HTTP answer.
    let mut stream = TcpStream::connect(worker.local_addr()).await.unwrap();
    stream
        .write_all(b"GET /health HTTP/1.1\r\nhost: sim\r\n\r\n")
        .await
        .unwrap();
    let mut buffer = [0u8; 256];
    let read = stream.read(&mut buffer).await;
    assert_eq!(
        read.map_err(|err| err.kind()),
        Err(ErrorKind::ConnectionReset)
    );

    // Metrics are exempt, and `ok` restores normal service.
    metrics_text(&client, &base).await;
    worker.set_fault(Fault::Ok);
    assert_eq!(timed_chat(&client, &base).await.0, StatusCode::OK);
}

/// Sends a raw HTTP request so the test fully controls when the socket closes.
async fn raw_post(worker_addr: std::net::SocketAddr, path: &str, body: &Value) -> TcpStream {
    let body = body.to_string();
    let mut stream = TcpStream::connect(worker_addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(body.as_bytes()).await.unwrap();
    stream
}

#[tokio::test]
async fn client_disconnect_mid_stream_cancels_and_frees_the_slot() {
    let config = SimConfig {
        decode_ms_per_token: 20.0,
        ..SimConfig::default()
    };
    let worker = start(config).await;
    let mut stream = raw_post(
        worker.local_addr(),
        "/v1/chat/completions",
        &chat_body("long answer", 500, true),
    )
    .await;
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&received).contains("data: ") {
        let read = stream.read(&mut buffer).await.unwrap();
        assert!(read > 0, "closed before the first chunk");
        received.extend_from_slice(&buffer[..read]);
    }
    assert_eq!(worker.stats().running, 1);
    drop(stream);
    let stats = wait_for_stats(&worker, |s| s.requests_cancelled == 1 && s.running == 0).await;
    assert_eq!((stats.requests_cancelled, stats.running), (1, 0));
    assert_eq!(stats.requests_completed, 0);
    assert!(stats.generation_tokens < 500);
}

#[tokio::test]
async fn client_disconnect_before_a_non_stream_answer_cancels() {
    let config = SimConfig {
        max_running: 1,
        decode_ms_per_token: 20.0,
        ..SimConfig::default()
    };
    let worker = start(config).await;
    let running = raw_post(
        worker.local_addr(),
        "/v1/chat/completions",
        &chat_body("first", 500, false),
    )
    .await;
    let stats = wait_for_stats(&worker, |s| s.running == 1).await;
    assert_eq!(stats.running, 1);
    let queued = raw_post(
        worker.local_addr(),
        "/v1/completions",
        &json!({"model": "sim-llama", "prompt": "second", "max_tokens": 5}),
    )
    .await;
    let stats = wait_for_stats(&worker, |s| s.waiting == 1).await;
    assert_eq!(stats.waiting, 1);
    drop(queued);
    drop(running);
    let stats = wait_for_stats(&worker, |s| s.requests_cancelled == 2).await;
    assert_eq!(stats.requests_cancelled, 2);
    assert_eq!((stats.running, stats.waiting), (0, 0));
}

#[tokio::test]
async fn shutdown_stops_the_server() {
    let worker = start(fast_config()).await;
    let addr = worker.local_addr();
    worker.shutdown().await;
    assert!(TcpStream::connect(addr).await.is_err());
}
