#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! An upstream that records every request byte for byte and answers with fixed bytes, so a
//! test can tell exactly what the gateway forwarded and what it passed back.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::Response;
use axum::routing::get;
use std::sync::Arc;
use switchyard_workers::WorkerSpec;

/// A non-streaming answer with a tool call and logprobs, spaced oddly on purpose: any
/// re-serialisation by the gateway would change these bytes.
pub const JSON_REPLY: &str = r#"{"id":"chatcmpl-echo","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":  \"Paris\"}"}}]},"logprobs":{"content":[{"token":"Par","logprob":-0.125,"bytes":[80,97,114],"top_logprobs":[{"token":"Par","logprob":-0.125,"bytes":[80,97,114]}]}]},"finish_reason":"tool_calls"}],  "usage":{"prompt_tokens":300,"completion_tokens":100,"total_tokens":400}}"#;

/// A stream with a tool-call delta, logprobs and a final usage chunk.
pub const SSE_REPLY: &str = concat!(
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]},\"logprobs\":null}]}\n\n",
    "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}}]},\"logprobs\":{\"content\":[{\"token\":\"Par\",\"logprob\":-0.5}]}}]}\n\n",
    "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":10,\"total_tokens\":40}}\n\n",
    "data: [DONE]\n\n",
);

#[derive(Clone, Debug)]
pub struct Seen {
    pub method: http::Method,
    /// Path and query as the worker received them.
    pub path: String,
    pub body: Bytes,
}

#[derive(Clone)]
struct EchoState {
    model: String,
    max_model_len: u64,
    seen: Arc<parking_lot::Mutex<Vec<Seen>>>,
}

pub struct EchoWorker {
    pub url: String,
    pub model: String,
    pub seen: Arc<parking_lot::Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for EchoWorker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn models(State(state): State<EchoState>) -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "object": "list",
        "data": [{"id": state.model, "object": "model", "max_model_len": state.max_model_len}],
    }))
}

async fn record(
    State(state): State<EchoState>,
    method: http::Method,
    uri: http::Uri,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or(uri.path().to_string(), |p| p.to_string());
    state.seen.lock().push(Seen {
        method,
        path: path.clone(),
        body: body.clone(),
    });
    let streaming = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.get("stream").and_then(|s| s.as_bool()))
        .unwrap_or(false);
    let (content_type, reply) = if streaming {
        ("text/event-stream", SSE_REPLY)
    } else {
        ("application/json", JSON_REPLY)
    };
    Response::builder()
        .header("content-type", content_type)
        .header("x-echo-model", &state.model)
        .header("x-echo-path", path)
        .body(Body::from(reply))
        .unwrap()
}

impl EchoWorker {
    pub async fn start(model: &str) -> Self {
        Self::start_with_context(model, 2048).await
    }

    /// A worker whose `/v1/models` states `max_model_len` tokens of context.
    pub async fn start_with_context(model: &str, max_model_len: u64) -> Self {
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let state = EchoState {
            model: model.to_string(),
            max_model_len,
            seen: Arc::clone(&seen),
        };
        let app = Router::new()
            .route("/v1/models", get(models))
            .route("/health", get(|| async { "ok" }))
            .fallback(record)
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            model: model.to_string(),
            seen,
            task,
        }
    }

    pub fn spec(&self, name: &str) -> WorkerSpec {
        WorkerSpec {
            name: name.into(),
            url: self.url.clone(),
            models: Some(vec![self.model.clone()]),
            health_path: None,
            engine: None,
        }
    }

    pub fn last(&self) -> Seen {
        self.seen
            .lock()
            .last()
            .cloned()
            .expect("the echo worker saw a request")
    }
}
