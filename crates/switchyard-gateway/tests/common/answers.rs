//! Requests while workers misbehave: exchanges bounded on the client side, what counts as a
//! complete answer, a worker's state as the admin API shows it, streams read to their error,
//! and the hang scenario the in-process and the worker-process tests share.

use http::Method;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use std::future::Future;
use std::time::Duration;
use switchyard_gateway::Config;
use tokio::time::Instant;

use super::{ADMIN_KEY, admin_call, chat, eventually, open, send};

/// The value of the first exposition line that starts with `series` (name and labels as
/// written); 0 when there is none.
pub fn metric_value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or(0.0)
}

/// A worker's `state` in `GET /admin/workers`; empty when it is not listed.
pub async fn worker_state(base: &str, name: &str) -> String {
    let all = admin_call(
        base,
        ADMIN_KEY,
        Method::GET,
        "/admin/workers",
        serde_json::Value::Null,
    )
    .await
    .json();
    all["workers"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["name"] == name))
        .and_then(|w| w["state"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// One chat request with a client-side bound; `None` if no complete exchange in time.
pub async fn answered(
    url: String,
    body: serde_json::Value,
    bound: Duration,
) -> Option<(u16, String)> {
    let exchange = async {
        let reply = send(
            Method::POST,
            &url,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await;
        (reply.status.as_u16(), reply.body)
    };
    tokio::time::timeout(bound, exchange).await.ok()
}

/// A whole answer: a stream that ends in `[DONE]` without an error event, or a body with usage.
pub fn complete(stream: bool, status: u16, body: &str) -> bool {
    status == 200
        && if stream {
            body.trim_end().ends_with("data: [DONE]") && !body.contains("\"error\"")
        } else {
            body.contains("\"usage\"")
        }
}

/// A streamed body as read until it ended or `within` passed.
pub struct StreamRead {
    /// Whether the stream ended within the bound.
    pub ended: bool,
    pub text: String,
    /// How long after the last data chunk an error event came; `None`: none came.
    pub error_after: Option<Duration>,
}

pub async fn read_stream(response: http::Response<Incoming>, within: Duration) -> StreamRead {
    let mut body = response.into_body();
    let mut text = String::new();
    let mut last_chunk_at = Instant::now();
    let mut error_after = None;
    let read = tokio::time::timeout(within, async {
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            if let Some(data) = frame.data_ref() {
                let piece = String::from_utf8_lossy(data);
                if piece.contains("\"error\"") {
                    error_after = Some(last_chunk_at.elapsed());
                } else {
                    last_chunk_at = Instant::now();
                }
                text.push_str(&piece);
            }
        }
    })
    .await;
    StreamRead {
        ended: read.is_ok(),
        text,
        error_after,
    }
}

/// A streamed chat whose answer may run to 1000 tokens (so far more is reserved than a stall
/// lets through), sent with `headers` besides the content type; answered 200, read for 5 s.
pub async fn long_stream(base: &str, headers: &[(&str, &str)]) -> StreamRead {
    let mut request = chat("sim-llama", "hello", true);
    request["max_tokens"] = serde_json::json!(1000);
    let mut all = vec![("content-type", "application/json")];
    all.extend_from_slice(headers);
    let response = open(
        Method::POST,
        &format!("{base}/v1/chat/completions"),
        &all,
        request.to_string(),
    )
    .await;
    assert_eq!(response.status(), 200);
    read_stream(response, Duration::from_secs(5)).await
}

/// The last event of an SSE body, without its `data: ` prefix.
pub fn last_event(text: &str) -> &str {
    let tail = text.rsplit("\n\n").find(|e| !e.is_empty()).unwrap();
    tail.trim().strip_prefix("data: ").unwrap()
}

/// Quick probes and short first-byte caps, so a hung worker is found and left within seconds.
pub fn quick_hang_detection(config: &mut Config) {
    config.health.prober.interval_ms = 100;
    config.health.prober.latency_bound_ms = 1000;
    config.upstream.first_byte.floor_ms = 300;
    config.upstream.first_byte.cap_ms = 1500;
}

/// Six complete answers, then `hang` makes sim-0's engine hang while `/health` still says 200;
/// of 24 requests sent 40 ms apart meanwhile (every other one streamed) none is lost, and
/// sim-0 is out of routing within 2 s and marked hung.
pub async fn a_hung_engine_loses_no_request(base: &str, hang: impl Future<Output = ()>) {
    let url = format!("{base}/v1/chat/completions");
    for _ in 0..6 {
        let body = chat("sim-llama", "hello there", false);
        let (status, text) = answered(url.clone(), body, Duration::from_secs(10))
            .await
            .unwrap();
        assert!(complete(false, status, &text), "{status} {text}");
    }

    hang.await;
    let hung_at = Instant::now();
    let mut requests = Vec::new();
    for i in 0..24 {
        let stream = i % 2 == 0;
        let body = chat("sim-llama", "hello there", stream);
        let task = tokio::spawn(answered(url.clone(), body, Duration::from_secs(10)));
        requests.push((stream, task));
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    let filtered = eventually(Duration::from_secs(2), || async {
        worker_state(base, "sim-0").await != "healthy"
    })
    .await;
    let took = hung_at.elapsed();
    assert!(
        filtered,
        "sim-0 still routable {took:?} after its engine hung"
    );
    for (i, (stream, task)) in requests.into_iter().enumerate() {
        let (status, body) = task
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("request {i} got no answer within 10 s"));
        assert!(
            complete(stream, status, &body),
            "request {i}: {status} {body}"
        );
    }
    assert_eq!(worker_state(base, "sim-0").await, "hung");
}
