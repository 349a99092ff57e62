//! Periodic upkeep of a node: Raft gauges from openraft's metrics, and on the leader a
//! `Tick` entry when the log has been quiet, so ledger time (lease and override expiry)
//! keeps moving without traffic.

use openraft::ServerState;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::watch;

use super::core::LedgerCore;
use crate::command::{Command, WriteRequest};
use crate::metrics::ROLES;

pub(crate) async fn run(
    core: Arc<LedgerCore>,
    committed: Arc<AtomicU64>,
    mut shutdown: watch::Receiver<bool>,
) {
    let interval = core.config.tick_interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(interval / 2) => {}
            _ = shutdown.changed() => break,
        }
        if *shutdown.borrow() {
            break;
        }
        let is_leader = sample(&core, &committed);
        let quiet_ms = core.ledger_now_ms().saturating_sub(core.view.load().now_ms);
        let stepping_down = core.stepping_down.load(Ordering::SeqCst);
        if is_leader
            && !stepping_down
            && quiet_ms >= u64::try_from(interval.as_millis()).unwrap_or(u64::MAX)
        {
            // A repeated tick is harmless: no request id. Bounded so a leader cut off from
            // its majority keeps its gauges fresh.
            let tick = WriteRequest {
                id: None,
                command: Command::Tick,
            };
            if let Err(e) = core.write_local(tick, interval).await {
                tracing::debug!(error = %e, "tick not committed");
            }
        }
    }
}

/// Copies openraft's metrics into the Prometheus gauges; answers whether this is the leader.
fn sample(core: &LedgerCore, committed: &AtomicU64) -> bool {
    let m = core.raft.metrics().borrow().clone();
    let learner = !m
        .membership_config
        .membership()
        .voter_ids()
        .any(|id| id == core.id);
    let role = match m.state {
        ServerState::Leader => "leader",
        ServerState::Candidate => "candidate",
        _ if learner => "learner",
        _ => "follower",
    };
    for name in ROLES {
        core.metrics
            .raft_role
            .with_label_values(&[name])
            .set(i64::from(name == role));
    }
    let gauge = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    core.metrics.raft_term.set(gauge(m.current_term));
    core.metrics
        .commit_index
        .set(gauge(committed.load(Ordering::Relaxed)));
    core.metrics
        .applied_index
        .set(gauge(m.last_applied.map_or(0, |id| id.index)));
    let last_log = m.last_log_index.unwrap_or(0);
    core.metrics.last_log_index.set(gauge(last_log));
    if let Some(replication) = &m.replication {
        for (follower, matched) in replication {
            let behind = last_log.saturating_sub(matched.map_or(0, |id| id.index));
            core.metrics
                .replication_lag
                .with_label_values(&[&follower.to_string()])
                .set(gauge(behind));
        }
    }
    m.state == ServerState::Leader
}
