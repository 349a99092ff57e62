//! A small OpenAI-compatible mock target for the load tool's integration tests.
//!
//! It streams SSE with a usage chunk (prompt 100 tokens, 40 cached), alternates the
//! `x-switchyard-worker` header between two names, can reject every Nth request with 503, or
//! hang forever, refuse with 503 + `Retry-After` (a request's first attempt, every attempt, or
//! one priority class), and cuts its SSE stream into small pieces written separately to
//! exercise the client's parser across chunk boundaries. It remembers every attempt's
//! request id, priority and retry-count headers and arrival time.

// Each test crate that includes this module uses only part of it.
#![allow(dead_code)]

use std::collections::HashSet;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use futures_util::StreamExt;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const MODEL: &str = "mock-model";
pub const PROMPT_TOKENS: u64 = 100;
pub const CACHED_TOKENS: u64 = 40;
pub const WORKERS: [&str; 2] = ["worker-a", "worker-b"];
const PIECE_BYTES: usize = 17;
/// Spacing between pieces so each one leaves in its own write instead of being coalesced.
const PIECE_GAP: Duration = Duration::from_millis(1);

#[derive(Clone, Copy, Debug)]
pub enum Behaviour {
    /// Answer normally, but reject every `reject_every`-th request with 503 (0 = never).
    Serve { reject_every: u64 },
    /// Accept the request and never answer.
    Hang,
    /// 503 with this `Retry-After` on the first attempt of each `x-request-id`; serve retries.
    RefuseFirst { retry_after: &'static str },
    /// 503 with this `Retry-After`, always.
    RefuseAll { retry_after: &'static str },
    /// 503 (Retry-After 1) for requests asking for this `x-switchyard-priority`; serve others.
    RefuseClass { class: &'static str },
}

/// One attempt as the mock saw it.
#[derive(Clone, Debug)]
pub struct SeenAttempt {
    pub request_id: Option<String>,
    pub priority: Option<String>,
    pub retry_count: Option<String>,
    pub at: Instant,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    served: AtomicU64,
    rejected: AtomicU64,
    hanging_now: AtomicU64,
    hanging_peak: AtomicU64,
    authorization: Mutex<HashSet<String>>,
    session_ids: Mutex<HashSet<String>>,
    attempts: Mutex<Vec<SeenAttempt>>,
}

struct MockState {
    behaviour: Behaviour,
    counters: Counters,
}

pub struct MockServer {
    addr: SocketAddr,
    state: Arc<MockState>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl MockServer {
    pub async fn start(behaviour: Behaviour) -> Self {
        let state = Arc::new(MockState {
            behaviour,
            counters: Counters::default(),
        });
        let router = Router::new()
            .route("/v1/models", get(models))
            .route("/v1/chat/completions", post(chat))
            .with_state(Arc::clone(&state));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Self {
            addr,
            state,
            shutdown: Some(shutdown),
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> u64 {
        self.state.counters.requests.load(Ordering::SeqCst)
    }

    pub fn served(&self) -> u64 {
        self.state.counters.served.load(Ordering::SeqCst)
    }

    pub fn rejected(&self) -> u64 {
        self.state.counters.rejected.load(Ordering::SeqCst)
    }

    pub fn hanging_peak(&self) -> u64 {
        self.state.counters.hanging_peak.load(Ordering::SeqCst)
    }

    pub fn authorization_values(&self) -> HashSet<String> {
        self.state.counters.authorization.lock().unwrap().clone()
    }

    pub fn session_ids(&self) -> HashSet<String> {
        self.state.counters.session_ids.lock().unwrap().clone()
    }

    pub fn attempts(&self) -> Vec<SeenAttempt> {
        self.state.counters.attempts.lock().unwrap().clone()
    }

    pub async fn stop(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        // Hanging handlers would keep a graceful shutdown waiting forever.
        self.task.abort();
        let _ = self.task.await;
    }
}

async fn models() -> Response {
    json_response(
        StatusCode::OK,
        format!(r#"{{"object":"list","data":[{{"id":"{MODEL}","object":"model"}}]}}"#),
    )
}

async fn chat(State(state): State<Arc<MockState>>, headers: HeaderMap, body: Bytes) -> Response {
    let counters = &state.counters;
    let number = counters.requests.fetch_add(1, Ordering::SeqCst) + 1;
    let seen = remember_headers(counters, &headers);
    let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
    if request["model"] != MODEL {
        return json_response(StatusCode::BAD_REQUEST, r#"{"error":"bad model"}"#.into());
    }
    let first_attempt = seen.request_id.as_ref().is_some_and(|id| {
        let attempts = counters.attempts.lock().unwrap();
        attempts
            .iter()
            .filter(|a| a.request_id.as_ref() == Some(id))
            .count()
            == 1
    });
    match state.behaviour {
        Behaviour::RefuseFirst { retry_after } if first_attempt => refuse(counters, retry_after),
        Behaviour::RefuseAll { retry_after } => refuse(counters, retry_after),
        Behaviour::RefuseClass { class } if seen.priority.as_deref() == Some(class) => {
            refuse(counters, "1")
        }
        Behaviour::Hang => {
            let now = counters.hanging_now.fetch_add(1, Ordering::SeqCst) + 1;
            counters.hanging_peak.fetch_max(now, Ordering::SeqCst);
            let _guard = HangingGuard(&counters.hanging_now);
            std::future::pending::<Response>().await
        }
        Behaviour::Serve { reject_every } if reject_every > 0 && number % reject_every == 0 => {
            counters.rejected.fetch_add(1, Ordering::SeqCst);
            json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                r#"{"error":{"message":"overloaded","type":"overloaded"}}"#.into(),
            )
        }
        Behaviour::Serve { .. } | Behaviour::RefuseFirst { .. } | Behaviour::RefuseClass { .. } => {
            let served = counters.served.fetch_add(1, Ordering::SeqCst);
            let worker = WORKERS[(served % 2) as usize];
            if request["stream"] == true {
                assert_eq!(request["stream_options"]["include_usage"], true);
                sse_response(worker)
            } else {
                let body = format!(
                    r#"{{"choices":[{{"index":0,"message":{{"role":"assistant","content":"Hello world"}}}}],{}}}"#,
                    usage_json()
                );
                let mut response = json_response(StatusCode::OK, body);
                response
                    .headers_mut()
                    .insert("x-switchyard-worker", worker.parse().unwrap());
                response
            }
        }
    }
}

struct HangingGuard<'a>(&'a AtomicU64);

impl Drop for HangingGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn refuse(counters: &Counters, retry_after: &str) -> Response {
    counters.rejected.fetch_add(1, Ordering::SeqCst);
    let mut response = json_response(
        StatusCode::SERVICE_UNAVAILABLE,
        r#"{"error":{"message":"overloaded","type":"overloaded"}}"#.into(),
    );
    response
        .headers_mut()
        .insert("retry-after", retry_after.parse().unwrap());
    response
}

fn remember_headers(counters: &Counters, headers: &HeaderMap) -> SeenAttempt {
    let text = |name: &str| {
        headers
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    let seen = SeenAttempt {
        request_id: text("x-request-id"),
        priority: text("x-switchyard-priority"),
        retry_count: text("x-switchyard-retry-count"),
        at: Instant::now(),
    };
    counters.attempts.lock().unwrap().push(seen.clone());
    if let Some(value) = headers.get("authorization") {
        let value = value.to_str().unwrap().to_owned();
        counters.authorization.lock().unwrap().insert(value);
    }
    if let Some(value) = headers.get("x-session-id") {
        let value = value.to_str().unwrap().to_owned();
        counters.session_ids.lock().unwrap().insert(value);
    }
    seen
}

fn usage_json() -> String {
    format!(
        r#""usage":{{"prompt_tokens":{PROMPT_TOKENS},"completion_tokens":2,"total_tokens":{},"prompt_tokens_details":{{"cached_tokens":{CACHED_TOKENS}}}}}"#,
        PROMPT_TOKENS + 2
    )
}

fn sse_response(worker: &str) -> Response {
    let events = [
        r#"{"id":"c1","choices":[{"index":0,"delta":{"role":"assistant"}}]}"#.to_owned(),
        r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"Hello"}}]}"#.to_owned(),
        r#"{"id":"c1","choices":[{"index":0,"delta":{"content":" wörld"}}]}"#.to_owned(),
        format!(r#"{{"id":"c1","choices":[],{}}}"#, usage_json()),
        "[DONE]".to_owned(),
    ];
    let text: String = events
        .iter()
        .map(|event| format!("data: {event}\r\n\r\n"))
        .collect::<String>();
    let pieces: Vec<Bytes> = text
        .as_bytes()
        .chunks(PIECE_BYTES)
        .map(Bytes::copy_from_slice)
        .collect();
    let stream = futures_util::stream::iter(pieces).then(|piece| async move {
        tokio::time::sleep(PIECE_GAP).await;
        Ok::<_, Infallible>(piece)
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .header("x-switchyard-worker", worker)
        .body(Body::from_stream(stream))
        .unwrap()
}

fn json_response(status: StatusCode, body: String) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap()
}
