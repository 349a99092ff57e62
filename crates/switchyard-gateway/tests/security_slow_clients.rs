#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Slow or numerous clients cannot exhaust the gateway: half-sent request heads are closed
//! within the header timeout while normal requests keep succeeding, slow bodies get 408,
//! connections beyond the cap wait, and bodies awaiting admission share a byte budget.

mod common;

use common::*;
use std::time::{Duration, Instant};
use switchyard_gateway::GatewayHandle;
use switchyard_gateway::config::ListenerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HALF_OPEN: usize = 1000;

async fn gateway(listener: ListenerConfig) -> (GatewayHandle, Vec<switchyard_sim::SimWorker>) {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.listener = listener;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    (gateway, sims)
}

/// Reads until the server closes the connection (or resets it); the bytes it sent.
async fn read_to_close(stream: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

async fn chat_ok(base: &str) -> bool {
    let reply = post_json(
        &format!("{base}/v1/chat/completions"),
        &chat("sim-llama", "hi", false),
    )
    .await;
    reply.status == 200
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_half_sent_heads_are_closed_within_the_header_timeout() {
    let header_timeout = Duration::from_millis(1500);
    let (gateway, _sims) = gateway(ListenerConfig {
        header_read_timeout_ms: header_timeout.as_millis() as u64,
        ..ListenerConfig::default()
    })
    .await;
    let addr = gateway.local_addr();
    let base = gateway.base_url();
    let opened_at = Instant::now();
    let mut holders = Vec::with_capacity(HALF_OPEN);
    for _ in 0..HALF_OPEN {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-ty")
            .await
            .unwrap();
        holders.push(stream);
    }
    let all_open = opened_at.elapsed();
    // Normal traffic keeps being served while the half-open heads are held.
    for _ in 0..20 {
        assert!(chat_ok(&base).await, "a normal request failed");
    }
    let deadline = header_timeout + all_open + Duration::from_secs(5);
    let closing = holders.into_iter().map(|mut stream| {
        tokio::spawn(async move {
            tokio::time::timeout(deadline, read_to_close(&mut stream))
                .await
                .is_ok()
        })
    });
    let mut closed = 0;
    for handle in closing {
        if handle.await.unwrap() {
            closed += 1;
        }
    }
    let took = opened_at.elapsed();
    assert_eq!(
        closed, HALF_OPEN,
        "{closed} of {HALF_OPEN} closed within {deadline:?}"
    );
    assert!(
        took >= header_timeout,
        "closed by the timeout, not at once ({took:?})"
    );
    assert!(chat_ok(&base).await, "still serving afterwards");
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_body_that_arrives_too_slowly_gets_408() {
    let (gateway, _sims) = gateway(ListenerConfig {
        body_read_timeout_ms: 300,
        ..ListenerConfig::default()
    })
    .await;
    let mut stream = TcpStream::connect(gateway.local_addr()).await.unwrap();
    stream
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\":")
        .await
        .unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buf = vec![0u8; 4096];
        let n = stream.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    })
    .await
    .expect("the gateway answers a stalled body");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout"), "{answer}");
    gateway.shutdown().await;
}

#[tokio::test]
async fn connections_beyond_the_cap_wait_for_a_free_slot() {
    let (gateway, _sims) = gateway(ListenerConfig {
        max_connections: 2,
        ..ListenerConfig::default()
    })
    .await;
    let addr = gateway.local_addr();
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(b"GET /health HTTP/1.1\r\nho")
            .await
            .unwrap();
        holders.push(stream);
    }
    // Give the server a moment to take both connections into its two slots.
    assert!(
        eventually(Duration::from_secs(5), || async {
            let metrics = gateway.state().stack.metrics.registry().gather();
            metrics
                .iter()
                .find(|f| f.name() == "switchyard_client_connections")
                .is_some_and(|f| f.get_metric()[0].get_gauge().get_value() >= 2.0)
        })
        .await
    );
    let mut third = TcpStream::connect(addr).await.unwrap();
    third
        .write_all(b"GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), third.read(&mut buf))
            .await
            .is_err(),
        "a third connection is not served while two hold the slots"
    );
    drop(holders.pop());
    let answer = tokio::time::timeout(Duration::from_secs(10), read_to_close(&mut third))
        .await
        .expect("served once a slot is free");
    assert!(
        String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn bodies_awaiting_admission_share_a_byte_budget() {
    let (gateway, _sims) = gateway(ListenerConfig {
        max_pending_body_bytes: 1000,
        ..ListenerConfig::default()
    })
    .await;
    let addr = gateway.local_addr();
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 800\r\n\r\n{")
        .await
        .unwrap();
    // Once its head is read, the stalled body holds 800 of the 1000 bytes.
    assert!(
        eventually(Duration::from_secs(5), || async {
            gateway.state().pending_bodies.held() >= 800
        })
        .await
    );
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    let big = chat("sim-llama", &"y".repeat(300), false);
    let reply = post_json(&url, &big).await;
    assert_eq!(reply.status, 503, "{}", reply.body);
    assert_eq!(reply.error_code(), "request_bodies_over_budget");
    assert!(reply.header("retry-after").is_some());
    drop(slow);
    assert!(
        eventually(Duration::from_secs(5), || async {
            gateway.state().pending_bodies.held() == 0
        })
        .await,
        "the stalled body's bytes are released when its client leaves"
    );
    let reply = post_json(&url, &big).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    gateway.shutdown().await;
}

#[tokio::test]
async fn metrics_on_their_own_listener_are_not_served_on_the_client_port() {
    let token = "metrics-token-0123456789";
    let (gateway, _sims) = gateway(ListenerConfig {
        metrics_addr: "127.0.0.1:0".into(),
        metrics_token: token.into(),
        ..ListenerConfig::default()
    })
    .await;
    let base = gateway.base_url();
    assert!(chat_ok(&base).await);
    let client_port = send(http::Method::GET, &format!("{base}/metrics"), &[], "").await;
    assert_eq!(client_port.status, 404, "{}", client_port.body);
    let metrics = format!("http://{}/metrics", gateway.metrics_addr().unwrap());
    let anonymous = send(http::Method::GET, &metrics, &[], "").await;
    assert_eq!(anonymous.status, 401, "the token still guards it");
    let bearer = format!("Bearer {token}");
    let scraped = send(
        http::Method::GET,
        &metrics,
        &[("authorization", &bearer)],
        "",
    )
    .await;
    assert_eq!(scraped.status, 200);
    assert!(
        scraped.body.contains("switchyard_requests_total"),
        "{}",
        &scraped.body[..200.min(scraped.body.len())]
    );
    let other = send(
        http::Method::GET,
        &format!("http://{}/v1/models", gateway.metrics_addr().unwrap()),
        &[],
        "",
    )
    .await;
    assert_eq!(other.status, 404, "only /metrics there");
    gateway.shutdown().await;
}
