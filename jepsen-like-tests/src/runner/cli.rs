//! Command-line arguments of the runner binary.
//!
//! `cargo run -p jepsen-like-tests -- --nodes 5 --time 120 --nemesis kill,partition,pause --seed 7`

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::config::RunConfig;
use crate::nemesis::{NemesisKind, UnknownNemesis};
use crate::workload::MixConfig;

#[derive(Debug, Parser)]
#[command(
    name = "jepsen-like-tests",
    about = "Jepsen-style chaos runs against a Switchyard cluster",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ClusterKind {
    /// The in-memory cluster (no processes; exercises the suite itself).
    Sim,
    /// Real node processes from `--cluster-config` (namespaces when root, else loopback).
    Local,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Replicas in the cluster.
    #[arg(long, default_value_t = 5)]
    pub nodes: u32,
    /// Length of the run, in seconds.
    #[arg(long = "time", default_value_t = 120)]
    pub time_secs: u64,
    /// Faults to inject: kill, pause, partition, loss, delay, clock, or all.
    #[arg(long, default_value = "kill,partition,pause")]
    pub nemesis: String,
    /// Seed of the fault schedule and of the clients' choices.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Concurrent clients (default: two per node).
    #[arg(long)]
    pub clients: Option<usize>,
    #[arg(long, value_enum, default_value_t = ClusterKind::Sim)]
    pub cluster: ClusterKind,
    /// TOML file with the node template, workers and network mode (for `--cluster local`;
    /// default: the crate's `cluster.example.toml`).
    #[arg(long)]
    pub cluster_config: Option<PathBuf>,
    /// Base folder for results (default: the crate's `results/`).
    #[arg(long)]
    pub results: Option<PathBuf>,
    /// Deliberate bugs of the in-memory cluster, comma-separated (see `sim::SimBugs::NAMES`).
    #[arg(long, default_value = "")]
    pub sim_bugs: String,
    /// Period budget of each workload caller, in tokens (small values exhaust it early).
    #[arg(long, default_value_t = 40_000)]
    pub budget_tokens: u64,
    /// One caller's own budget, `CALLER=TOKENS` (repeatable), e.g. `carol=20000`.
    #[arg(long = "caller-budget", value_parser = parse_caller_budget)]
    pub caller_budgets: Vec<(String, u64)>,
    /// The timeout replicas promise to answer within, in milliseconds.
    #[arg(long, default_value_t = 5_000)]
    pub request_timeout_ms: u64,
    /// Longest time nodes may take to agree after the heal and the end of traffic, in seconds.
    #[arg(long, default_value_t = 30)]
    pub convergence_bound_secs: u64,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Judge a results folder again, offline.
    Check {
        dir: PathBuf,
        /// Search this many override operations for linearizability (default: as recorded).
        #[arg(long)]
        linearizability_max_ops: Option<usize>,
        /// Search states the linearizability checker may visit (default: as recorded).
        #[arg(long)]
        linearizability_max_states: Option<usize>,
    },
    /// One Markdown table row per results folder (seed, faults, availability, verdicts).
    Summarize { dirs: Vec<PathBuf> },
    /// A TCP echo server standing in for a node (tests of the process machinery).
    #[command(hide = true)]
    StandIn {
        #[arg(long = "listen", required = true)]
        listen: Vec<SocketAddr>,
    },
    /// Exit 0 if an echo round trip to `--to` succeeds, 3 on timeout, 4 on failure.
    #[command(hide = true)]
    ProbeTcp {
        #[arg(long)]
        to: SocketAddr,
        #[arg(long, default_value_t = 500)]
        timeout_ms: u64,
    },
}

impl RunArgs {
    pub fn run_config(&self) -> Result<RunConfig, UnknownNemesis> {
        let nemeses = NemesisKind::parse_list(&self.nemesis)?;
        let mut config = RunConfig::new(Duration::from_secs(self.time_secs), self.seed, nemeses);
        config.clients = self.clients.unwrap_or(2 * self.nodes as usize).max(1);
        config.check.request_timeout = Duration::from_millis(self.request_timeout_ms);
        config.check.hang_grace = config
            .check
            .hang_grace
            .min(config.check.request_timeout / 2);
        config.check.convergence_bound = Duration::from_secs(self.convergence_bound_secs);
        Ok(config)
    }

    pub fn mix_config(&self) -> MixConfig {
        MixConfig {
            budget_tokens: self.budget_tokens,
            caller_budgets: self.caller_budgets.iter().cloned().collect(),
            ..MixConfig::default()
        }
    }

    pub fn results_base(&self) -> PathBuf {
        self.results
            .clone()
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"))
    }
}

fn parse_caller_budget(text: &str) -> Result<(String, u64), String> {
    let (caller, tokens) = text
        .split_once('=')
        .ok_or_else(|| format!("expected CALLER=TOKENS, got `{text}`"))?;
    let tokens = tokens
        .trim()
        .parse()
        .map_err(|e| format!("`{tokens}` is not a token count: {e}"))?;
    Ok((caller.trim().to_owned(), tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_command_line_parses() {
        let cli = Cli::try_parse_from([
            "jepsen-like-tests",
            "--nodes",
            "5",
            "--time",
            "120",
            "--nemesis",
            "kill,partition,pause",
            "--seed",
            "7",
        ])
        .unwrap();
        assert!(cli.command.is_none());
        let config = cli.run.run_config().unwrap();
        assert_eq!(config.duration, Duration::from_secs(120));
        assert_eq!(config.seed, 7);
        assert_eq!(config.clients, 10);
        assert_eq!(
            config.nemeses,
            vec![
                NemesisKind::Kill,
                NemesisKind::Pause,
                NemesisKind::Partition
            ]
        );
    }

    #[test]
    fn bad_nemesis_and_subcommands() {
        let cli = Cli::try_parse_from(["x", "--nemesis", "kill,flood"]).unwrap();
        assert!(cli.run.run_config().is_err());
        let cli = Cli::try_parse_from(["x", "--caller-budget", "carol=900"]).unwrap();
        assert_eq!(cli.run.mix_config().caller_budgets.get("carol"), Some(&900));
        assert!(Cli::try_parse_from(["x", "--caller-budget", "carol"]).is_err());
        let cli = Cli::try_parse_from(["x", "check", "/tmp/run"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Check { .. })));
        assert!(
            Cli::try_parse_from(["x", "stand-in"]).is_err(),
            "needs --listen"
        );
    }
}
