//! Shared helpers for the HTTP tests: a hyper-util client, JSON and SSE readers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use switchyard_sim::{SimConfig, SimStats, SimWorker};
use tokio::time::Instant;

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

pub async fn start(config: SimConfig) -> SimWorker {
    SimWorker::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

pub fn post(url: &str, body: &Value) -> Request<Full<Bytes>> {
    Request::post(url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap()
}

pub fn get(url: &str) -> Request<Full<Bytes>> {
    Request::get(url).body(Full::new(Bytes::new())).unwrap()
}

/// Sends a request and reads the whole body.
pub async fn send(
    client: &HttpClient,
    request: Request<Full<Bytes>>,
) -> (StatusCode, HeaderMap, Bytes) {
    let response = client.request(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, bytes)
}

pub async fn send_json(client: &HttpClient, request: Request<Full<Bytes>>) -> (StatusCode, Value) {
    let (status, _, body) = send(client, request).await;
    (status, serde_json::from_slice(&body).unwrap())
}

pub fn chat_body(content: &str, max_tokens: u32, stream: bool) -> Value {
    serde_json::json!({
        "model": "sim-llama",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "stream": stream,
        "stream_options": {"include_usage": true},
    })
}

/// One SSE `data:` payload and when it was parsed.
pub struct SseEvent {
    pub data: String,
    pub at: Instant,
}

/// Reads an SSE body incrementally, timestamping each event as it arrives.
pub async fn read_sse(response: hyper::Response<Incoming>) -> Vec<SseEvent> {
    let mut body = response.into_body();
    let mut buffer = String::new();
    let mut events = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        let Some(chunk) = frame.data_ref() else {
            continue;
        };
        buffer.push_str(std::str::from_utf8(chunk).unwrap());
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data = event.trim().strip_prefix("data: ").unwrap().to_owned();
            events.push(SseEvent {
                data,
                at: Instant::now(),
            });
        }
    }
    assert!(buffer.is_empty(), "trailing partial event: {buffer:?}");
    events
}

/// Value of the first exposition line starting with `series` (name plus labels).
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("series {series} not found in:\n{text}"))
}

pub async fn metrics_text(client: &HttpClient, base: &str) -> String {
    let (status, _, body) = send(client, get(&format!("{base}/metrics"))).await;
    assert_eq!(status, StatusCode::OK);
    String::from_utf8(body.to_vec()).unwrap()
}

/// Waits (bounded) until the worker's stats satisfy `done`; the server notices a
/// vanished client asynchronously, so tests poll for the outcome with a deadline.
pub async fn wait_for_stats(worker: &SimWorker, done: impl Fn(&SimStats) -> bool) -> SimStats {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stats = worker.stats();
        if done(&stats) || Instant::now() > deadline {
            return stats;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A fast worker so HTTP tests finish quickly while keeping relative timings.
pub fn fast_config() -> SimConfig {
    SimConfig {
        time_scale: 0.1,
        ..SimConfig::default()
    }
}
