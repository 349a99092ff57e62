#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A state bigger than any single RPC body still reaches a learner that joins after the log
//! was purged: the snapshot goes over in chunks that the Raft server accepts.

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::SystemClock;
use switchyard_ledger::LedgerNode;
use tempfile::TempDir;

/// Encoding and storing a 10 MiB snapshot in a debug build takes a while: writes get more
/// time than the usual test timeout.
async fn patient_node(id: u64, dir: &TempDir) -> LedgerNode {
    let mut config = config(id, dir, "127.0.0.1:0");
    config.write_timeout = Duration::from_secs(20);
    config.rpc_timeout = Duration::from_secs(2);
    start_with(config, Arc::new(SystemClock)).await
}

/// Prefix text per record: 160 records make the state ≈ 10 MiB.
const PREFIX_BYTES: usize = 64 * 1024;
const BIG_RECORDS: u64 = 160;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_joining_late_catches_up_on_a_state_over_8_mib() {
    let dir = TempDir::new().unwrap();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(patient_node(id, &dir).await);
    }
    form_group(&nodes).await;
    let leader = leader_index(&nodes);
    for key in 0..BIG_RECORDS {
        let prefix = format!("{key:08}").repeat(PREFIX_BYTES / 8);
        nodes[leader]
            .record_affinity(key, &prefix, "w", &[], "load")
            .await
            .unwrap();
    }
    // Enough small entries that a snapshot covers the big ones and the log behind it is
    // purged (tests snapshot every 200 entries and keep 20).
    for key in BIG_RECORDS..BIG_RECORDS + 250 {
        nodes[leader]
            .record_affinity(key, "", "w", &[], "load")
            .await
            .unwrap();
    }
    let state_bytes: usize = nodes[leader]
        .affinity_records()
        .iter()
        .map(|r| r.prefix.len())
        .sum();
    assert!(state_bytes > 8 * 1024 * 1024, "state {state_bytes} bytes");
    let purged = nodes[leader]
        .raft()
        .metrics()
        .borrow()
        .purged
        .map_or(0, |id| id.index);
    assert!(purged > BIG_RECORDS, "log purged only up to {purged}");

    let learner = patient_node(4, &dir).await;
    // The call may return before the learner has caught up (bounded by the write timeout);
    // catching up is judged below.
    let _ = nodes[leader].add_learner(4, learner.raft_addr()).await;
    let target = nodes[leader].status().last_applied;
    assert!(
        eventually(Duration::from_secs(60), || learner.status().last_applied
            >= target)
        .await,
        "learner applied {} of {target}",
        learner.status().last_applied
    );
    let records = learner.affinity_records();
    assert_eq!(records.len() as u64, BIG_RECORDS + 250);
    let learner_bytes: usize = records.iter().map(|r| r.prefix.len()).sum();
    assert_eq!(learner_bytes, state_bytes);
    learner.shutdown().await;
    for node in nodes {
        node.shutdown().await;
    }
}
