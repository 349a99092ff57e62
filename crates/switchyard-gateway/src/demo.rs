//! `switchyard demo`: the embedded default. A single gateway with simulated workers in the same
//! process, so a newcomer sees the whole path work with one command.

use std::net::SocketAddr;
use std::time::Duration;
use switchyard_load::{LoadConfig, LoadReport, Workload, render_side_by_side};
use switchyard_sim::{SimConfig, SimWorker};
use switchyard_workers::WorkerSpec;

use crate::config::Config;
use crate::server::{GatewayHandle, StartError, start};

pub const DEMO_ADMIN_KEY: &str = "demo-admin-key-000001";

#[derive(Clone, Debug)]
pub struct DemoOptions {
    pub host: String,
    pub port: u16,
    pub workers: usize,
    pub time_scale: f64,
    /// Seconds of the multiturn workload per policy; `None` serves until Ctrl-C.
    pub load_secs: Option<u64>,
    pub rate: f64,
    pub seed: u64,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8080,
            workers: 4,
            time_scale: 1.0,
            load_secs: None,
            rate: 20.0,
            seed: 7,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("cannot start a simulated worker: {0}")]
    Sim(#[from] std::io::Error),
    #[error(transparent)]
    Gateway(#[from] StartError),
    #[error("load run failed: {0}")]
    Load(#[from] switchyard_load::LoadError),
    #[error("--workers must be between 1 and 64")]
    WorkerCount,
}

/// A gateway and the simulated fleet behind it.
pub struct DemoFleet {
    pub gateway: GatewayHandle,
    pub workers: Vec<SimWorker>,
}

impl DemoFleet {
    pub async fn start(options: &DemoOptions, port: u16, policy: &str) -> Result<Self, DemoError> {
        if options.workers == 0 || options.workers > 64 {
            return Err(DemoError::WorkerCount);
        }
        let mut workers = Vec::with_capacity(options.workers);
        for i in 0..options.workers {
            let config = SimConfig {
                name: format!("sim-{i}"),
                time_scale: options.time_scale,
                ..SimConfig::default()
            };
            let addr: SocketAddr = ([127, 0, 0, 1], 0).into();
            workers.push(SimWorker::start(config, addr).await?);
        }
        let mut config = Config::default();
        config.server.host = options.host.clone();
        config.server.port = port;
        config.routing.policy = policy.to_string();
        config.workers = workers
            .iter()
            .map(|w| WorkerSpec {
                name: w.name().to_string(),
                url: w.base_url(),
                models: None,
                health_path: None,
                engine: None,
            })
            .collect();
        let gateway = start(config, Some(DEMO_ADMIN_KEY.to_string())).await?;
        Ok(Self { gateway, workers })
    }

    pub async fn shutdown(self) {
        self.gateway.shutdown().await;
        for worker in self.workers {
            worker.shutdown().await;
        }
    }
}

/// Runs the demo: either serve until Ctrl-C, or compare policies under load.
pub async fn run(options: DemoOptions) -> Result<(), DemoError> {
    match options.load_secs {
        None => serve(&options).await,
        Some(secs) => compare_policies(&options, Duration::from_secs(secs)).await,
    }
}

async fn serve(options: &DemoOptions) -> Result<(), DemoError> {
    let fleet = DemoFleet::start(options, options.port, "cache_aware").await?;
    let url = fleet.gateway.base_url();
    println!(
        "Switchyard demo: gateway on {url}, policy cache_aware, {} simulated workers:",
        fleet.workers.len()
    );
    for worker in &fleet.workers {
        println!("  {} at {}", worker.name(), worker.base_url());
    }
    println!(
        "\nTry it:\n  curl -s {url}/v1/chat/completions -H 'content-type: application/json' \\\n    -d '{{\"model\":\"sim-llama\",\"messages\":[{{\"role\":\"user\",\"content\":\"hello there\"}}]}}'\n\n\
         OpenAI SDK (Python):\n  from openai import OpenAI\n  client = OpenAI(base_url=\"{url}/v1\", api_key=\"unused\")\n  \
         for chunk in client.chat.completions.create(model=\"sim-llama\", stream=True,\n      messages=[{{\"role\": \"user\", \"content\": \"hello\"}}]):\n      print(chunk.choices[0].delta.content or \"\", end=\"\")\n\n\
         Metrics: {url}/metrics   Workers: curl -H 'authorization: Bearer {DEMO_ADMIN_KEY}' {url}/admin/workers\nCtrl-C to stop."
    );
    crate::signal::wait_for_shutdown().await;
    println!("shutting down");
    fleet.shutdown().await;
    Ok(())
}

async fn compare_policies(options: &DemoOptions, duration: Duration) -> Result<(), DemoError> {
    let mut reports: Vec<(&str, LoadReport)> = Vec::new();
    for policy in ["round_robin", "cache_aware"] {
        // A fresh fleet per policy: both start with cold caches, so the comparison is fair.
        let fleet = DemoFleet::start(options, 0, policy).await?;
        println!(
            "== {policy}: multiturn workload, {} req/s for {} s against {}",
            options.rate,
            duration.as_secs(),
            fleet.gateway.base_url()
        );
        let mut load = LoadConfig::new(fleet.gateway.base_url());
        load.rate = options.rate;
        load.duration = duration;
        load.workload = Workload::Multiturn;
        load.seed = options.seed;
        // Named, not discovered: workers may still be reporting their models right after start.
        load.model = Some("sim-llama".into());
        load.progress = true;
        let result = switchyard_load::run(load).await;
        fleet.shutdown().await;
        reports.push((policy, result?));
    }
    let columns: Vec<(&str, &LoadReport)> = reports.iter().map(|(p, r)| (*p, r)).collect();
    println!("\n{}", render_side_by_side(&columns));
    Ok(())
}
