#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! Real llama.cpp `llama-server` processes for the end-to-end suite. The binary and model come
//! from `benches/e2e/llama/build.sh` (or the paths in `SWITCHYARD_LLAMA_SERVER` and
//! `SWITCHYARD_LLAMA_MODEL`); without them the suite skips with a message.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use switchyard_workers::{EngineKind, WorkerSpec};

/// The model name the servers announce (`--alias`).
pub const MODEL: &str = "smollm2";

pub struct LlamaPaths {
    pub server: PathBuf,
    pub model: PathBuf,
}

/// The binary and model, or `None` (with the reason printed) when either is missing or the
/// suite is not switched on. It asks for `SWITCHYARD_LLAMA_E2E=1` until it has passed on a
/// machine with the binary: a timing-dependent suite must not first run unseen in CI.
pub fn paths() -> Option<LlamaPaths> {
    if std::env::var("SWITCHYARD_LLAMA_E2E").as_deref() != Ok("1") {
        eprintln!(
            "SKIPPED: set SWITCHYARD_LLAMA_E2E=1 to run the real llama.cpp suite (binary from benches/e2e/llama/build.sh)"
        );
        return None;
    }
    let cache = std::env::var_os("SWITCHYARD_LLAMA_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/switchyard-llama"))
        });
    let pick = |var: &str, default: &str| {
        std::env::var_os(var)
            .map(PathBuf::from)
            .or_else(|| cache.as_ref().map(|c| c.join(default)))
    };
    let server = pick("SWITCHYARD_LLAMA_SERVER", "bin/llama-server")?;
    let model = pick(
        "SWITCHYARD_LLAMA_MODEL",
        "models/smollm2-135m-instruct.gguf",
    )?;
    for (what, path) in [("llama-server", &server), ("model", &model)] {
        if !path.is_file() {
            eprintln!(
                "SKIPPED: no {what} at {} (run benches/e2e/llama/build.sh, or set SWITCHYARD_LLAMA_SERVER / SWITCHYARD_LLAMA_MODEL)",
                path.display()
            );
            return None;
        }
    }
    Some(LlamaPaths { server, model })
}

pub struct LlamaServer {
    pub name: String,
    pub port: u16,
    pub child: Option<tokio::process::Child>,
    /// Whether `/health` was seen answering 503 while the model loaded.
    pub saw_loading: bool,
    pub started_in: Duration,
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
    }
}

impl LlamaServer {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn spec(&self) -> WorkerSpec {
        WorkerSpec {
            name: self.name.clone(),
            url: self.url(),
            models: None,
            health_path: None,
            engine: Some(EngineKind::Llamacpp),
        }
    }

    /// Starts `llama-server` (one thread, `slots` parallel slots, metrics on) at `port` and
    /// waits until its `/health` answers 200.
    pub async fn start(paths: &LlamaPaths, name: &str, port: u16, slots: u32) -> Self {
        let started = Instant::now();
        let child = tokio::process::Command::new(&paths.server)
            .arg("-m")
            .arg(&paths.model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--alias", MODEL, "-c", &(2048 * slots).to_string()])
            .args(["-np", &slots.to_string(), "-t", "1", "--metrics"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn llama-server");
        let mut server = Self {
            name: name.into(),
            port,
            child: Some(child),
            saw_loading: false,
            started_in: Duration::ZERO,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        let health = format!("{}/health", server.url());
        loop {
            assert!(
                Instant::now() < deadline,
                "llama-server {name} did not get ready"
            );
            if let Some(child) = &mut server.child {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("llama-server {name} exited early: {status}");
                }
            }
            match try_get(&health).await {
                Some((200, _)) => break,
                Some((503, body)) => {
                    assert!(body.contains("Loading model"), "{body}");
                    server.saw_loading = true;
                }
                _ => {}
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server.started_in = started.elapsed();
        server
    }

    /// SIGKILL, as a crashed engine would leave.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.unwrap();
        }
    }

    /// One value from its Prometheus `/metrics`.
    pub async fn metric(&self, name: &str) -> Option<f64> {
        let (_, text) = try_get(&format!("{}/metrics", self.url())).await?;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    }
}

/// A GET that reports a refused connection as `None` instead of failing.
pub async fn try_get(url: &str) -> Option<(u16, String)> {
    use http_body_util::BodyExt;
    let request = http::Request::get(url)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .ok()?;
    let response = tokio::time::timeout(
        Duration::from_secs(5),
        super::common::client().request(request),
    )
    .await
    .ok()?
    .ok()?;
    let status = response.status().as_u16();
    let body = tokio::time::timeout(Duration::from_secs(5), response.into_body().collect())
        .await
        .ok()?
        .ok()?
        .to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}
