//! One chaos run end to end: start the cluster, set up the workload, run the clients and the
//! nemesis side by side until the end of the schedule (the nemesis heals everything
//! `recovery` before the end), read the final state of every node until they agree, stop the
//! cluster, check, and keep everything in the results folder.
//!
//! Clients and the nemesis are futures joined in the caller's task (no spawned tasks), so a
//! run owns everything it started and dropping it cancels all of it.

pub mod cli;
mod config;
mod final_reads;
pub mod local;
mod nemesis_driver;
mod outcome;
pub mod report;
pub mod results;
pub mod stand_in;
pub mod summary;

use futures_util::future::join_all;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::time::{Instant, timeout};

use crate::checker::{availability_by_fault, check_all};
use crate::cluster::{Cluster, Endpoint};
use crate::history::{ErrorInfo, EventType, HistoryWriter, Recorder};
use crate::nemesis::Schedule;
use crate::workload::{Completion, Workload};

pub use config::{RunConfig, ScheduleOverrides};
pub use nemesis_driver::{AppliedFault, FaultOutcome};
pub use outcome::{RunError, RunOutcome};

async fn client_loop<W: Workload>(
    slot: usize,
    endpoints: &[Endpoint],
    workload: &W,
    recorder: &Recorder,
    config: &RunConfig,
    deadline: Instant,
) {
    let mut rng =
        StdRng::seed_from_u64(config.seed ^ (slot as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let mut process = recorder.new_process();
    let mut turn = slot;
    while Instant::now() < deadline && !endpoints.is_empty() {
        let endpoint = &endpoints[turn % endpoints.len()];
        turn += 1;
        let op = workload.next_op(&mut rng);
        let ticket = recorder.invoke(process, Some(endpoint.node), op.clone());
        let completion = timeout(config.abandon_after(), workload.invoke(endpoint, &op))
            .await
            .unwrap_or_else(|_| Completion::Info(ErrorInfo::new("client_timeout")));
        workload.observe(&op, &completion);
        let (kind, result, error) = match completion {
            Completion::Ok(result) => (EventType::Ok, Some(result), None),
            Completion::Fail(error) => (EventType::Fail, None, Some(error)),
            Completion::Info(error) => (EventType::Info, None, Some(error)),
        };
        recorder.complete(ticket, kind, result, error);
        if kind == EventType::Info {
            // The old operation may still be in flight: this client continues as a new process.
            process = recorder.new_process();
        }
        tokio::time::sleep(config.think_time).await;
    }
}

/// Runs one chaos run against `cluster` with `workload`.
pub async fn run<C: Cluster, W: Workload>(
    cluster: &C,
    workload: &W,
    mut config: RunConfig,
) -> Result<RunOutcome, RunError> {
    let writer = match &config.results_dir {
        Some(dir) => Some(HistoryWriter::create(dir.join(results::HISTORY_FILE))?),
        None => None,
    };
    let nodes = cluster.nodes();
    let schedule = Schedule::generate(&config.schedule_config(nodes.clone()), config.seed);
    tracing::info!(
        nodes = nodes.len(),
        windows = schedule.faults.len(),
        "starting the cluster"
    );
    if let Err(e) = cluster.start().await {
        let _ = cluster.stop().await;
        return Err(e.into());
    }
    let endpoints = cluster.endpoints();
    let budgets = match workload.setup(&endpoints).await {
        Ok(budgets) => budgets,
        Err(e) => {
            let _ = cluster.stop().await;
            return Err(e.into());
        }
    };
    if config.check.budgets.is_empty() {
        config.check.budgets = budgets;
    }
    let recorder = Recorder::new(writer);
    let start = recorder.started_at();
    let deadline = start + schedule.end;
    let clients = join_all(
        (0..config.clients)
            .map(|slot| client_loop(slot, &endpoints, workload, &recorder, &config, deadline)),
    );
    let nemesis = nemesis_driver::drive(cluster, &schedule, &recorder, start);
    let (_, (faults, healed_at)) = tokio::join!(clients, nemesis);
    let final_states =
        final_reads::read_until_converged(cluster, &recorder, &config, healed_at).await;
    let node_logs = nodes
        .iter()
        .filter_map(|&n| cluster.node_log(n).map(|path| (n, path)))
        .collect();
    if let Err(e) = cluster.stop().await {
        tracing::warn!(error = %e, "stopping the cluster failed");
    }
    let history = recorder.finish()?;
    let verdicts = check_all(&history, &final_states, &config.check);
    let availability = history
        .operations()
        .map(|ops| availability_by_fault(&history, &ops, &config.check))
        .unwrap_or_default();
    let outcome = RunOutcome {
        nodes,
        config,
        schedule,
        faults,
        history,
        final_states,
        availability,
        verdicts,
        node_logs,
    };
    if let Some(dir) = &outcome.config.results_dir {
        if let Err(e) = results::write_artifacts(dir, &outcome) {
            tracing::error!(error = %e, dir = %dir.display(), "writing the run's artifacts failed");
        }
    }
    Ok(outcome)
}
