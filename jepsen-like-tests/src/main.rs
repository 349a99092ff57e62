//! The chaos runner: `cargo run -p jepsen-like-tests -- --nodes 5 --time 120 --nemesis
//! kill,partition,pause --seed 7`. Prints the report and exits non-zero if a checker found a
//! violation; the history, node logs and verdicts stay in the results folder.

use anyhow::bail;
use clap::Parser;
use jepsen_like_tests::runner::cli::{Cli, ClusterKind, Command, RunArgs};
use jepsen_like_tests::runner::local::{self, LocalClusterFile};
use jepsen_like_tests::runner::stand_in::{probe_echo, serve_echo};
use jepsen_like_tests::runner::{RunOutcome, report, results, run, summary};
use jepsen_like_tests::sim::{SimBugs, SimCluster};
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("jepsen-like-tests: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("jepsen-like-tests: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Some(Command::Check {
            dir,
            linearizability_max_ops,
            linearizability_max_states,
        }) => {
            let verdicts = results::recheck_with(&dir, |config| {
                if let Some(ops) = linearizability_max_ops {
                    config.linearizability_max_ops = ops;
                }
                if let Some(states) = linearizability_max_states {
                    config.linearizability_max_states = states;
                }
            })?;
            let mut passed = true;
            for verdict in &verdicts {
                println!("{:<26} {}", verdict.checker, verdict.validity);
                for note in &verdict.notes {
                    println!("    {note}");
                }
                for violation in &verdict.violations {
                    println!("    - {}", violation.message);
                    for op in &violation.ops {
                        println!("        {op}");
                    }
                }
                passed &= verdict.validity != jepsen_like_tests::checker::Validity::Invalid;
            }
            Ok(exit(passed))
        }
        Some(Command::Summarize { dirs }) => {
            let mut runs = Vec::new();
            for dir in &dirs {
                runs.push(summary::summarize(dir)?);
            }
            print!("{}", summary::render_table(&runs));
            Ok(exit(runs.iter().all(summary::RunSummary::passed)))
        }
        Some(Command::StandIn { listen }) => {
            println!("ready {listen:?}");
            serve_echo(&listen).await?;
            Ok(ExitCode::SUCCESS)
        }
        Some(Command::ProbeTcp { to, timeout_ms }) => {
            let result = probe_echo(to, Duration::from_millis(timeout_ms)).await;
            println!("{result:?}");
            Ok(ExitCode::from(result.exit_code()))
        }
        None => {
            let outcome = run_chaos(&cli.run).await?;
            print!("{}", report::render(&outcome));
            Ok(exit(outcome.passed()))
        }
    }
}

fn exit(passed: bool) -> ExitCode {
    if passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

async fn run_chaos(args: &RunArgs) -> anyhow::Result<RunOutcome> {
    let mut config = args.run_config()?;
    let dir = results::create_run_dir(&args.results_base(), args.seed)?;
    config.results_dir = Some(dir.clone());
    eprintln!("results: {}", dir.display());
    match args.cluster {
        ClusterKind::Sim => {
            let bugs = SimBugs::parse(&args.sim_bugs)?;
            let cluster = SimCluster::new(args.nodes, bugs, args.seed);
            let workload = cluster.workload(args.mix_config());
            Ok(run(&cluster, &workload, config).await?)
        }
        ClusterKind::Local => {
            if !args.sim_bugs.is_empty() {
                bail!("--sim-bugs only applies to --cluster sim");
            }
            let path = args.cluster_config.clone().unwrap_or_else(|| {
                std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("cluster.example.toml")
            });
            let file = LocalClusterFile::load(&path)?;
            let prepared = local::prepare(
                file,
                args.nodes,
                args.seed,
                dir.join(results::NODES_DIR),
                args.mix_config(),
                config,
            )?;
            if let Some(why) = &prepared.fell_back {
                eprintln!("SKIP network namespaces ({why}): loopback instead, partitions skipped");
            }
            Ok(run(&prepared.cluster, &prepared.workload, prepared.config).await?)
        }
    }
}
