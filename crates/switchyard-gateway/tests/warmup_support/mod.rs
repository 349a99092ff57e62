#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! Fixtures of the warmup and degradation tests: fake workers that serve named models,
//! answer after a delay and remember every completion request (tags and body); admin calls;
//! metric reads.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use http::{HeaderMap, Method, StatusCode};
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use switchyard_workers::WorkerSpec;

use crate::common::{ADMIN_KEY, Reply, admin_call, send};

mod gateway;
pub use gateway::*;

/// One completion request a fake worker received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub purpose: String,
    pub caller: String,
    pub session: Option<String>,
    pub body: Value,
}

struct Inner {
    name: String,
    models: Vec<String>,
    delay: Duration,
    seen: Mutex<Vec<Seen>>,
}

pub struct FakeWorker {
    inner: Arc<Inner>,
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeWorker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeWorker {
    pub async fn start(name: &str, models: &[&str], delay: Duration) -> Self {
        let inner = Arc::new(Inner {
            name: name.into(),
            models: models.iter().map(|m| m.to_string()).collect(),
            delay,
            seen: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(complete))
            .route("/v1/completions", post(complete))
            .route("/v1/models", get(list_models))
            .route("/health", get(|| async { "ok" }))
            .route("/metrics", get(|| async { "" }))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { inner, url, task }
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    pub fn spec(&self) -> WorkerSpec {
        WorkerSpec {
            name: self.inner.name.clone(),
            url: self.url.clone(),
            models: Some(self.inner.models.clone()),
            health_path: None,
            engine: None,
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.inner.seen.lock().clone()
    }

    pub fn warmups(&self) -> usize {
        self.seen().iter().filter(|s| s.purpose == "warmup").count()
    }
}

async fn complete(State(worker): State<Arc<Inner>>, headers: HeaderMap, body: String) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let model = body["model"].as_str().unwrap_or_default().to_string();
    worker.seen.lock().push(Seen {
        purpose: header("x-switchyard-purpose").unwrap_or_default(),
        caller: header("x-switchyard-caller").unwrap_or_default(),
        session: header("x-session-id"),
        body,
    });
    if !worker.models.contains(&model) {
        return (StatusCode::NOT_FOUND, "unknown model").into_response();
    }
    tokio::time::sleep(worker.delay).await;
    Json(json!({
        "id": "cmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": format!("answer from {}", worker.name)}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11},
    }))
    .into_response()
}

async fn list_models(State(worker): State<Arc<Inner>>) -> Json<Value> {
    let data: Vec<Value> = worker
        .models
        .iter()
        .map(|m| json!({"id": m, "object": "model"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
}

pub async fn admin(method: Method, base: &str, path: &str, body: Value) -> Reply {
    admin_call(base, ADMIN_KEY, method, path, body).await
}

/// A chat completion as a client with `key` (if any) and extra headers sends it.
pub async fn chat_as(base: &str, key: Option<&str>, extra: &[(&str, &str)], body: &Value) -> Reply {
    let auth = key.map(|k| format!("Bearer {k}"));
    let mut headers: Vec<(&str, &str)> = vec![("content-type", "application/json")];
    if let Some(auth) = &auth {
        headers.push(("authorization", auth.as_str()));
    }
    headers.extend_from_slice(extra);
    send(
        Method::POST,
        &format!("{base}/v1/chat/completions"),
        &headers,
        body.to_string(),
    )
    .await
}

pub fn chat_body(model: &str, system: Option<&str>, user: &str) -> Value {
    let mut messages = Vec::new();
    if let Some(system) = system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.push(json!({"role": "user", "content": user}));
    json!({"model": model, "max_tokens": 4, "messages": messages})
}

/// The value of one series (`name{labels}` exactly as rendered), 0 when absent.
pub async fn metric(base: &str, series: &str) -> f64 {
    let text = send(Method::GET, &format!("{base}/metrics"), &[], "")
        .await
        .body;
    text.lines()
        .find_map(|line| {
            line.strip_prefix(series)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|value| value.trim().parse().ok())
        })
        .unwrap_or(0.0)
}
