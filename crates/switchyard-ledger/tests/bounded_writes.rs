#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The bugs the chaos suite found (jepsen-like-tests/RESULTS.md), at the ledger's API:
//! a leader cut off from its majority answers reads and writes within the write timeout with
//! "unavailable" errors (never a raw Raft error, never a hang), and a write repeated under the
//! same request id applies once, also across a snapshot and a restart.

mod common;

use common::{SECRET, cluster, config, leader_index, start, start_with};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_core::{QuotaScope, SystemClock};
use switchyard_ledger::command::{RequestId, WriteRequest};
use switchyard_ledger::{Command, CommandResponse, LedgerClient, LedgerError};
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_answers_reads_and_writes_unavailable_within_the_timeout() {
    let dir = TempDir::new().unwrap();
    let nodes = cluster(3, &dir).await;
    let leader = &nodes[leader_index(&nodes)];
    leader.faults().isolate();
    // Give the followers time to stop acknowledging (heartbeats fail from now on).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let write_timeout = config(1, &dir, "127.0.0.1:0").write_timeout;
    let limit = write_timeout + Duration::from_millis(700);

    let started = Instant::now();
    let read = leader.overrides().await;
    let read_took = started.elapsed();
    assert!(
        matches!(read, Err(LedgerError::NoLeader)),
        "a read without a quorum is 'no leader', not a raft error: {read:?}"
    );
    assert!(read_took < limit, "the read took {read_took:?}");

    let started = Instant::now();
    let write = leader.record_affinity(7, "", "w1", &[], "isolated").await;
    let write_took = started.elapsed();
    assert!(
        matches!(write, Err(LedgerError::OutcomeUnknown(_))),
        "a write proposed without a quorum has an unknown outcome: {write:?}"
    );
    assert!(write_took < limit, "the write took {write_took:?}");
    assert!(write.unwrap_err().is_unavailable());

    leader.faults().heal();
    for node in nodes {
        node.shutdown().await;
    }
}

fn proposal() -> Command {
    Command::ProposeOverride {
        scope: QuotaScope::caller("alice"),
        extra_tokens: 100,
        reason: "incident".into(),
        duration_ms: 600_000,
        requester: "ops-ann".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_request_id_applies_once_across_a_snapshot_and_a_restart() {
    let dir = TempDir::new().unwrap();
    let node_config = config(1, &dir, "127.0.0.1:0");
    let node = start(1, &dir, "127.0.0.1:0", Arc::new(SystemClock)).await;
    node.initialize_single().await.unwrap();
    node.wait_for_leader(Duration::from_secs(5)).await.unwrap();
    let request = WriteRequest {
        id: Some(RequestId {
            origin: 9,
            boot: 1,
            seq: 1,
        }),
        command: proposal(),
    };
    let first = node.write_request(request.clone()).await.unwrap();
    assert!(matches!(first, CommandResponse::OverrideProposed { .. }));
    assert_eq!(node.write_request(request.clone()).await.unwrap(), first);
    // Enough entries for a snapshot (every 200 in tests) that purges the first proposal.
    for key in 0..260u64 {
        node.record_affinity(key, "", "w", &[], "fill")
            .await
            .unwrap();
    }
    let purged = node
        .raft()
        .metrics()
        .borrow()
        .purged
        .map_or(0, |id| id.index);
    assert!(purged > 2, "the log was purged past the proposal: {purged}");
    node.shutdown().await;

    let node = start_with(node_config, Arc::new(SystemClock)).await;
    node.wait_for_leader(Duration::from_secs(5)).await.unwrap();
    assert_eq!(node.write_request(request).await.unwrap(), first);
    let overrides = node.overrides().await.unwrap();
    assert_eq!(overrides.len(), 1, "applied once: {overrides:?}");
    let counters = node.counters().await.unwrap();
    assert_eq!(counters.duplicate_requests, 2);
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_writes_under_fresh_ids_so_equal_commands_both_apply() {
    let dir = TempDir::new().unwrap();
    let nodes = cluster(3, &dir).await;
    let addrs = nodes.iter().map(|n| n.raft_addr().to_owned()).collect();
    let client = LedgerClient::new(addrs, SECRET, Duration::from_secs(3));
    let a = client.write(&proposal()).await.unwrap();
    let b = client.write(&proposal()).await.unwrap();
    assert_ne!(a, b, "two calls are two proposals");
    let leader = &nodes[leader_index(&nodes)];
    assert_eq!(leader.overrides().await.unwrap().len(), 2);
    for node in nodes {
        node.shutdown().await;
    }
}
