#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unused_imports)]
//! Shared fixtures: simulated workers on loopback, the gateway in-process or as a real
//! process, and a small HTTP client.

mod answers;
mod capture;
mod load;
mod process;

pub use answers::*;
pub use capture::*;
pub use load::*;
pub use process::*;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::future::Future;
use std::time::Duration;
use switchyard_gateway::Config;
use switchyard_sim::{SimConfig, SimWorker};
use switchyard_workers::{HttpClient, HttpClientConfig, WorkerSpec, build_http_client};

pub const ADMIN_KEY: &str = "test-admin-key-000001";

pub fn client() -> HttpClient {
    build_http_client(&HttpClientConfig::default())
}

pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `error.code` of an OpenAI-shaped error body.
    pub fn error_code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

pub async fn open(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> http::Response<Incoming> {
    let mut builder = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let request = builder.body(Full::new(body.into())).unwrap();
    tokio::time::timeout(Duration::from_secs(30), client().request(request))
        .await
        .expect("request timed out")
        .expect("request failed")
}

pub async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Reply {
    let response = open(method, url, headers, body).await;
    let (parts, body) = response.into_parts();
    let bytes = tokio::time::timeout(Duration::from_secs(30), body.collect())
        .await
        .expect("body timed out")
        .expect("body failed")
        .to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

/// A request to the admin API with `key` as the bearer token; a null body sends none.
pub async fn admin_call(
    base: &str,
    key: &str,
    method: Method,
    path: &str,
    body: serde_json::Value,
) -> Reply {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    send(
        method,
        &format!("{base}{path}"),
        &[
            ("authorization", &format!("Bearer {key}")),
            ("content-type", "application/json"),
        ],
        body,
    )
    .await
}

pub fn named_admin_key(
    name: &str,
    key: &str,
    role: switchyard_gateway::config::AdminRole,
) -> switchyard_gateway::config::AdminKey {
    switchyard_gateway::config::AdminKey {
        name: name.into(),
        key: key.into(),
        role,
    }
}

/// A 403 `insufficient_role` whose message names the caller's role.
pub fn assert_insufficient_role(reply: &Reply, role: &str) {
    assert_eq!(reply.status, 403, "{}", reply.body);
    let error = &reply.json()["error"];
    assert_eq!(error["code"], "insufficient_role", "{}", reply.body);
    assert_eq!(error["type"], "permission_error", "{}", reply.body);
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("role `{role}`")),
        "the message names the role: {message}"
    );
}

/// `GET path` with `key` as the bearer token.
pub async fn admin_get(base: &str, key: &str, path: &str) -> Reply {
    admin_call(base, key, Method::GET, path, serde_json::Value::Null).await
}

/// A chat completion to `base` as the tenant whose API key is `key`.
pub async fn tenant_chat(base: &str, key: &str, body: &serde_json::Value) -> Reply {
    send(
        Method::POST,
        &format!("{base}/v1/chat/completions"),
        &[
            ("authorization", &format!("Bearer {key}")),
            ("content-type", "application/json"),
        ],
        body.to_string(),
    )
    .await
}

/// A chat completion to `base` whose answer is read by the caller.
pub async fn open_chat(base: &str, request: &serde_json::Value) -> http::Response<Incoming> {
    open(
        Method::POST,
        &format!("{base}/v1/chat/completions"),
        &[("content-type", "application/json")],
        request.to_string(),
    )
    .await
}

pub async fn post_json(url: &str, body: &serde_json::Value) -> Reply {
    send(
        Method::POST,
        url,
        &[("content-type", "application/json")],
        body.to_string(),
    )
    .await
}

pub fn chat(model: &str, content: &str, stream: bool) -> serde_json::Value {
    serde_json::json!({
        "model": model,
        "stream": stream,
        "stream_options": {"include_usage": true},
        "max_tokens": 8,
        "messages": [{"role": "user", "content": content}],
    })
}

/// Fast simulated workers: time runs 20× faster than the default model.
pub async fn start_sims(count: usize) -> Vec<SimWorker> {
    start_sims_scaled(count, 0.05).await
}

/// Simulated workers whose simulated time runs at `time_scale` (1.0 = the default model).
pub async fn start_sims_scaled(count: usize, time_scale: f64) -> Vec<SimWorker> {
    start_sims_with(count, |config| config.time_scale = time_scale).await
}

/// Simulated workers `sim-0`, `sim-1`, … of the default model changed by `tune`.
pub async fn start_sims_with(count: usize, tune: impl Fn(&mut SimConfig)) -> Vec<SimWorker> {
    let mut sims = Vec::new();
    for i in 0..count {
        let mut config = SimConfig {
            name: format!("sim-{i}"),
            ..SimConfig::default()
        };
        tune(&mut config);
        sims.push(
            SimWorker::start(config, "127.0.0.1:0".parse().unwrap())
                .await
                .unwrap(),
        );
    }
    sims
}

pub fn specs(sims: &[SimWorker]) -> Vec<WorkerSpec> {
    sims.iter()
        .map(|s| WorkerSpec {
            name: s.name().to_string(),
            url: s.base_url(),
            models: None,
            health_path: None,
            engine: None,
        })
        .collect()
}

pub fn config_for(sims: &[SimWorker], policy: &str) -> Config {
    let mut config = Config::default();
    config.server.port = 0;
    config.routing.policy = policy.into();
    config.workers = specs(sims);
    config
}

/// Polls `condition` until it holds or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The gateway's `/metrics` exposition as text.
pub async fn metrics_text(base_url: &str) -> String {
    send(Method::GET, &format!("{base_url}/metrics"), &[], "")
        .await
        .body
}
