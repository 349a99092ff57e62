//! `switchyard-sim`: runs a simulated inference worker, or drives load at an endpoint.

use std::io::IsTerminal;

use anyhow::Context;
use clap::{Parser, Subcommand};
use switchyard_load::LoadArgs;
use switchyard_sim::{OracleArgs, SimWorker, WorkerArgs, run_oracle};
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
#[command(
    name = "switchyard-sim",
    version,
    about = "Simulated LLM inference worker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve one simulated worker until Ctrl-C or SIGTERM.
    Worker(WorkerArgs),
    /// Drive open-loop load at an OpenAI-compatible endpoint and print a report.
    Load(LoadArgs),
    /// Replay a load workload offline with each conversation pinned to one worker (the
    /// sticky-session oracle) and print its hit rate and the trace's working set as JSON.
    Oracle(OracleArgs),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    match Cli::parse().command {
        Command::Worker(args) => run_worker(args).await,
        Command::Load(args) => {
            switchyard_load::run_cli(args).await?;
            Ok(())
        }
        Command::Oracle(args) => {
            let report = serde_json::to_string_pretty(&run_oracle(&args)?)?;
            if let Some(path) = &args.json {
                std::fs::write(path, &report)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
            println!("{report}");
            Ok(())
        }
    }
}

async fn run_worker(args: WorkerArgs) -> anyhow::Result<()> {
    let config = args.to_config();
    let worker = SimWorker::start(config.clone(), args.addr())
        .await
        .with_context(|| format!("binding {}", args.addr()))?;
    tracing::info!(
        name = %config.name,
        model = %config.model,
        addr = %worker.local_addr(),
        url = %worker.base_url(),
        max_running = config.max_running,
        time_scale = config.time_scale,
        cold_start_ms = config.cold_start_ms,
        cold_after_ms = config.cold_after_ms,
        "sim worker listening"
    );
    wait_for_stop_signal().await?;
    tracing::info!(name = %config.name, "stop signal received, shutting down");
    worker.shutdown().await;
    tracing::info!(name = %config.name, "sim worker stopped");
    Ok(())
}

#[cfg(unix)]
async fn wait_for_stop_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("installing SIGTERM handler")?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.context("waiting for Ctrl-C")?,
        _ = terminate.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_stop_signal() -> anyhow::Result<()> {
    tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")
}
