//! Shared fixtures for the socket tests: fast health configs, a registry, simulated workers,
//! a background load generator, and `eventually`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod raw_server;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use switchyard_sim::{SimConfig, SimWorker};
use switchyard_workers::{
    HealthConfig, HttpClient, HttpClientConfig, Registry, RegistryObserver, RegistryOptions,
    WorkerHandle, WorkerSpec, build_http_client,
};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Tens of milliseconds everywhere; latency thresholds sized for the simulator.
pub fn fast_config() -> HealthConfig {
    let mut c = HealthConfig::default();
    c.health.interval_ms = 50;
    c.health.timeout_ms = 200;
    c.health.suspect_interval_ms = 20;
    c.latency_aware.scrape_interval_ms = 100;
    c.latency_aware.scrape_timeout_ms = 500;
    c.latency_aware.min_samples = 3;
    c.latency_aware.max_window_ms = 2000;
    // A 500-word prompt prefills in ~20 ms normally, ~400 ms under Slow{20}.
    c.latency_aware.overload_ttft_p90_ms = 200;
    c.latency_aware.recover_ttft_p90_ms = 100;
    c.prober.interval_ms = 50;
    c.prober.latency_bound_ms = 500;
    c.drain.timeout_ms = 2000;
    c
}

#[derive(Default)]
pub struct Recorder {
    pub events: Mutex<Vec<String>>,
}

impl RegistryObserver for Recorder {
    fn worker_added(&self, worker: &Arc<WorkerHandle>) {
        self.events.lock().push(format!("+{}", worker.name()));
    }
    fn worker_removed(&self, worker: &Arc<WorkerHandle>) {
        self.events.lock().push(format!("-{}", worker.name()));
    }
}

pub struct Fixture {
    pub registry: Registry,
    pub recorder: Arc<Recorder>,
    pub metrics: prometheus::Registry,
    pub client: HttpClient,
}

impl Fixture {
    pub async fn start(config: HealthConfig) -> Self {
        let client = build_http_client(&HttpClientConfig::default());
        let recorder = Arc::new(Recorder::default());
        let metrics = prometheus::Registry::new();
        let (registry, _join) = Registry::start(
            client.clone(),
            recorder.clone(),
            RegistryOptions::new(config, &metrics),
        )
        .await
        .unwrap();
        Self {
            registry,
            recorder,
            metrics,
            client,
        }
    }

    pub async fn add(&self, name: &str, url: &str) -> Arc<WorkerHandle> {
        self.registry
            .add(WorkerSpec {
                name: name.into(),
                url: url.into(),
                models: None,
                health_path: None,
                engine: None,
            })
            .await
            .unwrap()
    }

    pub fn metrics_text(&self) -> String {
        use prometheus::Encoder;
        let mut buf = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&self.metrics.gather(), &mut buf)
            .unwrap();
        String::from_utf8(buf).unwrap()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.registry.stop();
    }
}

pub async fn sim(name: &str) -> SimWorker {
    let config = SimConfig {
        name: name.into(),
        ..SimConfig::default()
    };
    SimWorker::start(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Polls `condition` every 5 ms; returns how long it took, panics after `limit`.
pub async fn eventually(
    what: &str,
    limit: Duration,
    mut condition: impl FnMut() -> bool,
) -> Duration {
    let start = Instant::now();
    loop {
        if condition() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Asserts `condition` holds for the whole of `period`.
pub async fn holds(what: &str, period: Duration, mut condition: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < period {
        assert!(
            condition(),
            "{what} stopped holding after {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Closed-loop traffic straight to a worker (as other clients of a shared worker would send),
/// so its `/metrics` histograms keep moving. Stops when dropped.
pub struct Load {
    tasks: JoinSet<()>,
    pub sent: Arc<AtomicU64>,
}

impl Load {
    pub fn start(client: &HttpClient, base_url: &str, concurrency: usize) -> Self {
        let mut tasks = JoinSet::new();
        let sent = Arc::new(AtomicU64::new(0));
        for lane in 0..concurrency {
            let client = client.clone();
            let url = format!("{base_url}/v1/completions");
            let sent = Arc::clone(&sent);
            tasks.spawn(async move {
                loop {
                    let n = sent.fetch_add(1, Ordering::Relaxed);
                    // A unique first word defeats the simulator's prefix cache.
                    let prompt = format!("lane{lane}-req{n} {}", "word ".repeat(500));
                    let body = serde_json::json!({
                        "model": "sim-llama", "prompt": prompt, "max_tokens": 4,
                    });
                    let request = Request::post(&url)
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(body.to_string())))
                        .unwrap();
                    match client.request(request).await {
                        Ok(response) => {
                            let _ = response.into_body().collect().await;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            });
        }
        Self { tasks, sent }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.tasks.abort_all();
    }
}
