#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! Shared fixtures: simulated workers on loopback, the gateway in-process or as a real
//! process, and a small HTTP client.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use std::future::Future;
use std::process::Stdio;
use std::time::Duration;
use switchyard_gateway::Config;
use switchyard_sim::{SimConfig, SimWorker};
use switchyard_workers::{HttpClient, HttpClientConfig, WorkerSpec, build_http_client};
use tokio::io::{AsyncBufReadExt, BufReader};

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
    let mut sims = Vec::new();
    for i in 0..count {
        let config = SimConfig {
            name: format!("sim-{i}"),
            time_scale,
            ..SimConfig::default()
        };
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

/// The `switchyard` binary as a real child process; killed on drop.
pub struct GatewayProcess {
    pub child: tokio::process::Child,
    pub base_url: String,
    stderr_drain: tokio::task::JoinHandle<()>,
    /// The last lines the process wrote to stderr, for failure messages.
    pub recent_log: std::sync::Arc<parking_lot::Mutex<std::collections::VecDeque<String>>>,
}

impl GatewayProcess {
    /// The last lines of the process's log, one per line.
    pub fn log_tail(&self) -> String {
        self.recent_log
            .lock()
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        self.stderr_drain.abort();
    }
}

impl GatewayProcess {
    /// Starts `switchyard serve` with `args` (plus `--port 0`) and waits for its listening line.
    pub async fn spawn(args: &[&str]) -> Self {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
            .arg("serve")
            .args(args)
            .args(["--port", "0"])
            .env("RUST_LOG", "info")
            .env("SWITCHYARD_ADMIN_API_KEY", ADMIN_KEY)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn switchyard");
        let stderr = child.stderr.take().unwrap();
        let mut lines = BufReader::new(stderr).lines();
        let find_addr = async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("switchyard gateway listening") {
                    let addr = line
                        .split_whitespace()
                        .find_map(|w| w.strip_prefix("addr="))
                        .expect("addr field")
                        .to_string();
                    return addr;
                }
            }
            panic!("gateway exited before listening");
        };
        let addr = tokio::time::timeout(Duration::from_secs(20), find_addr)
            .await
            .expect("gateway did not start");
        // Keep draining stderr so the child never blocks on a full pipe.
        let recent_log =
            std::sync::Arc::new(parking_lot::Mutex::new(std::collections::VecDeque::new()));
        let kept = recent_log.clone();
        let stderr_drain = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut kept = kept.lock();
                if kept.len() == 200 {
                    kept.pop_front();
                }
                kept.push_back(line);
            }
        });
        Self {
            child,
            base_url: format!("http://{addr}"),
            stderr_drain,
            recent_log,
        }
    }
}

/// Runs the `switchyard` binary to completion and returns (exit code, stderr).
pub async fn run_to_exit(args: &[&str]) -> (i32, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_switchyard"))
        .args(args)
        .output()
        .await
        .expect("run switchyard");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// A fake worker that lists `sim-llama` on `GET /v1/models`, answers every other request with a
/// fixed non-streaming completion and keeps the raw request heads it received, so tests can see
/// what the gateway forwarded.
pub struct CaptureWorker {
    pub url: String,
    pub heads: std::sync::Arc<parking_lot::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for CaptureWorker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl CaptureWorker {
    pub async fn start(usage_tokens: (u64, u64)) -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let heads = std::sync::Arc::new(parking_lot::Mutex::new(Vec::new()));
        let seen = heads.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    let mut read = 0;
                    // One request per connection: read until the body is complete enough.
                    let models_request = loop {
                        match socket.read(&mut buf[read..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => read += n,
                        }
                        let text = String::from_utf8_lossy(&buf[..read]).to_string();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let head = text[..end].to_lowercase();
                            let length: usize = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse().ok())
                                .unwrap_or(0);
                            if read >= end + 4 + length {
                                let models = head.starts_with("get /v1/models");
                                seen.lock().push(head);
                                break models;
                            }
                        }
                    };
                    let body = if models_request {
                        r#"{"object":"list","data":[{"id":"sim-llama","object":"model"}]}"#
                            .to_string()
                    } else {
                        format!(
                            r#"{{"id":"c","object":"chat.completion","choices":[{{"index":0,"message":{{"role":"assistant","content":"ok"}}}}],"usage":{{"prompt_tokens":{},"completion_tokens":{},"total_tokens":{}}}}}"#,
                            usage_tokens.0,
                            usage_tokens.1,
                            usage_tokens.0 + usage_tokens.1
                        )
                    };
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                        body.len(),
                        body
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                });
            }
        });
        Self { url, heads, task }
    }

    pub fn spec(&self, name: &str) -> WorkerSpec {
        WorkerSpec {
            name: name.into(),
            url: self.url.clone(),
            models: Some(vec!["sim-llama".into()]),
            health_path: None,
            engine: None,
        }
    }
}

/// A free loopback port (bound once, then released for a child process to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Three `switchyard serve` replicas of one Raft group on `config`: node 1 on a fixed Raft
/// port, nodes 2 and 3 joining it; each with its own data dir under `dir`.
pub async fn spawn_three_replicas(
    config: &std::path::Path,
    dir: &std::path::Path,
) -> Vec<GatewayProcess> {
    let raft1 = format!("127.0.0.1:{}", free_port());
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let data = dir.join(format!("node{id}"));
        let id_text = id.to_string();
        let raft = if id == 1 {
            raft1.clone()
        } else {
            "127.0.0.1:0".to_string()
        };
        let mut args = vec![
            "--config",
            config.to_str().unwrap(),
            "--node-id",
            &id_text,
            "--raft-addr",
            &raft,
            "--data-dir",
            data.to_str().unwrap(),
        ];
        if id > 1 {
            args.extend(["--join", raft1.as_str()]);
        }
        nodes.push(GatewayProcess::spawn(&args).await);
    }
    nodes
}

/// The gateway's `/metrics` exposition as text.
pub async fn metrics_text(base_url: &str) -> String {
    send(Method::GET, &format!("{base_url}/metrics"), &[], "")
        .await
        .body
}
