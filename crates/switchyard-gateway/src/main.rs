//! The `switchyard` binary: `serve` a gateway from a config file, or run the `demo`.

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use switchyard_gateway::StartOptions;
use switchyard_gateway::config::{Config, ConfigError};
#[cfg(feature = "demo")]
use switchyard_gateway::demo::{self, DemoOptions};
use switchyard_gateway::signal::wait_for_shutdown;
use switchyard_workers::WorkerSpec;

// Small short-lived allocations dominate the request path; mimalloc serves them from
// per-thread free lists with fewer instructions than glibc malloc.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "switchyard", version, about = "LLM-inference gateway")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as text or as one JSON object per line.
    #[arg(
        long,
        global = true,
        value_enum,
        env = "SWITCHYARD_LOG_FORMAT",
        default_value = "text"
    )]
    log_format: switchyard_gateway::logging::LogFormat,
    /// Threads running the request path (default: one per CPU the process may run on).
    /// Where the gateway shares few cores with other busy processes, fewer threads wake
    /// each other less (benches/RESULTS.md, wake-ups per request).
    #[arg(long, global = true, env = "SWITCHYARD_WORKER_THREADS")]
    worker_threads: Option<std::num::NonZeroUsize>,
    #[command(flatten)]
    otlp: OtlpArgs,
}

/// OpenTelemetry traces (off unless an endpoint is given).
#[derive(Args)]
struct OtlpArgs {
    /// OTLP/HTTP collector to export request spans to, e.g. `http://otel-collector:4318`
    /// (`/v1/traces` is added when no path is given); JSON encoding.
    #[arg(long, global = true, env = "SWITCHYARD_OTLP_ENDPOINT")]
    otlp_endpoint: Option<String>,
    /// `service.name` of the exported spans.
    #[arg(
        long,
        global = true,
        env = "OTEL_SERVICE_NAME",
        default_value = "switchyard"
    )]
    otlp_service_name: String,
    /// Spans are posted when a batch is this old (or 512 spans large).
    #[arg(long, global = true, default_value_t = 1000)]
    otlp_batch_ms: u64,
    /// Spans waiting for export; beyond this they are dropped and counted
    /// (`switchyard_telemetry_spans_dropped_total`).
    #[arg(long, global = true, default_value_t = 8192)]
    otlp_queue: usize,
}

impl OtlpArgs {
    fn exporter(&self) -> anyhow::Result<Option<switchyard_gateway::telemetry::Exporter>> {
        let Some(endpoint) = &self.otlp_endpoint else {
            return Ok(None);
        };
        let options = switchyard_gateway::telemetry::OtlpOptions {
            service_name: self.otlp_service_name.clone(),
            batch_interval: std::time::Duration::from_millis(self.otlp_batch_ms.max(1)),
            queue_capacity: self.otlp_queue,
            ..switchyard_gateway::telemetry::OtlpOptions::new(endpoint)
        };
        switchyard_gateway::telemetry::Exporter::start(options)
            .map(Some)
            .map_err(anyhow::Error::msg)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Run a gateway from a config file; flags override the file.
    Serve(ServeArgs),
    /// Run a gateway with built-in simulated workers (the embedded default).
    #[cfg(feature = "demo")]
    Demo(DemoArgs),
    /// Operate a running fleet: quotas, overrides, cluster membership, workers.
    Ctl(switchyard_gateway::ctl::CtlArgs),
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// TOML config file (see config/switchyard.toml); defaults apply without it.
    #[arg(long)]
    config: Option<PathBuf>,
    #[arg(long)]
    host: Option<String>,
    #[arg(long)]
    port: Option<u16>,
    /// A worker, `URL` or `name=URL`; repeatable. Replaces the file's workers.
    #[arg(long = "worker-url")]
    worker_urls: Vec<String>,
    /// Routing policy: round_robin | cache_aware | consistent_hash | power_of_two | least_load.
    #[arg(long)]
    policy: Option<String>,
    /// This replica's Raft node id (cluster.node_id).
    #[arg(long)]
    node_id: Option<u64>,
    /// Address of this replica's Raft/ledger server (cluster.raft_addr).
    #[arg(long)]
    raft_addr: Option<String>,
    /// Raft address of an existing member to join (cluster.join).
    #[arg(long)]
    join: Option<String>,
    /// Directory of the durable ledger (cluster.data_dir).
    #[arg(long)]
    data_dir: Option<String>,
    /// Address other replicas reach this one's Raft server at (cluster.advertise_addr).
    #[arg(long)]
    advertise_addr: Option<String>,
    /// Node id from the host name's trailing ordinal plus one (`switchyard-2` → 3), so every
    /// pod of a StatefulSet gets a stable id from one pod template.
    #[arg(long)]
    node_id_from_hostname: bool,
}

#[cfg(feature = "demo")]
#[derive(Args)]
struct DemoArgs {
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Number of simulated workers.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Simulated time factor (0.1 = ten times faster workers).
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
    /// Drive the multiturn workload for SECS seconds against round_robin, then cache_aware,
    /// and print both summaries side by side.
    #[arg(long, value_name = "SECS")]
    load: Option<u64>,
    /// Request rate for --load, requests per second.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

fn build_config(args: &ServeArgs) -> Result<Config, ConfigError> {
    let config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    apply_flags(args, config)
}

/// Flags override the file, at start-up and on every reload of the file.
fn apply_flags(args: &ServeArgs, mut config: Config) -> Result<Config, ConfigError> {
    if let Some(host) = &args.host {
        config.server.host = host.clone();
    }
    if let Some(port) = args.port {
        config.server.port = port;
    }
    if let Some(policy) = &args.policy {
        config.routing.policy = policy.clone();
    }
    if let Some(id) = args.node_id {
        config.cluster.node_id = id;
    }
    if let Some(addr) = &args.raft_addr {
        config.cluster.raft_addr = addr.clone();
    }
    if let Some(join) = &args.join {
        config.cluster.join = join.clone();
    }
    if let Some(dir) = &args.data_dir {
        config.cluster.data_dir = dir.clone();
    }
    if let Some(addr) = &args.advertise_addr {
        config.cluster.advertise_addr = addr.clone();
    }
    if args.node_id_from_hostname {
        config.cluster.node_id = node_id_from_hostname()?;
    }
    if !args.worker_urls.is_empty() {
        config.workers = args
            .worker_urls
            .iter()
            .map(|url| {
                WorkerSpec::parse_flag(url)
                    .map_err(|e| ConfigError::invalid("--worker-url", e.to_string()))
            })
            .collect::<Result<_, _>>()?;
    }
    config
        .validate()
        .map_err(|e| match (e, args.policy.is_some()) {
            (ConfigError::Invalid { path, message }, true) if path == "routing.policy" => {
                ConfigError::invalid("--policy", message)
            }
            (e, _) => e,
        })?;
    Ok(config)
}

/// `name-N` → N + 1, from `$HOSTNAME` or `/etc/hostname`.
fn node_id_from_hostname() -> Result<u64, ConfigError> {
    let hostname = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .unwrap_or_default();
    let hostname = hostname.trim();
    hostname
        .rsplit_once('-')
        .and_then(|(_, ordinal)| ordinal.parse::<u64>().ok())
        .and_then(|ordinal| ordinal.checked_add(1))
        .ok_or_else(|| {
            ConfigError::invalid(
                "--node-id-from-hostname",
                format!("host name `{hostname}` does not end in -<ordinal>"),
            )
        })
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let exporter = cli.otlp.exporter()?;
    switchyard_gateway::logging::init(cli.log_format, exporter.clone());
    let runtime = switchyard_gateway::runtime::build(cli.worker_threads)
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => {
                let config = match build_config(&args) {
                    Ok(config) => config,
                    Err(error) => {
                        eprintln!("switchyard: {error}");
                        std::process::exit(2);
                    }
                };
                let admin_key = std::env::var("SWITCHYARD_ADMIN_API_KEY")
                    .ok()
                    .or_else(|| Some(config.admin.api_key.expose().to_string()));
                let flags = args.clone();
                let options = StartOptions {
                    admin_key,
                    config_path: args.config.clone(),
                    config_overrides: Some(Arc::new(move |c| apply_flags(&flags, c))),
                    ..StartOptions::default()
                };
                let plan = switchyard_gateway::lifecycle::DrainPlan::from_config(&config.server);
                let gateway = switchyard_gateway::start_with(config, options).await?;
                wait_for_shutdown().await;
                tracing::info!("shutting down");
                tokio::select! {
                    _ = gateway.drain_and_stop(plan) => {
                        if let Some(exporter) = &exporter {
                            exporter.flush(std::time::Duration::from_secs(5)).await;
                        }
                        Ok(())
                    }
                    _ = wait_for_shutdown() => {
                        tracing::warn!("second stop signal: exiting without finishing the drain");
                        std::process::exit(130);
                    }
                }
            }
            Command::Ctl(args) => match switchyard_gateway::ctl::run(&args).await {
                Ok(answer) => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&answer).unwrap_or_default()
                    );
                    Ok(())
                }
                Err(error) => {
                    eprintln!("switchyard ctl: {error}");
                    std::process::exit(1);
                }
            },
            #[cfg(feature = "demo")]
            Command::Demo(args) => {
                let options = DemoOptions {
                    host: args.host,
                    port: args.port,
                    workers: args.workers,
                    time_scale: args.time_scale,
                    load_secs: args.load,
                    rate: args.rate,
                    seed: args.seed,
                };
                demo::run(options).await.map_err(anyhow::Error::from)
            }
        }
    })
}
