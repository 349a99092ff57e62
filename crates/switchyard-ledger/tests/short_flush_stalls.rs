#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A leader whose every log flush is slow, though each by less than a heartbeat interval
//! (150 ms against 300 ms heartbeats between replicas in three regions). openraft 0.9's core
//! appended and flushed one client write at a time and, while it worked through a queue of
//! them, handled no replication answer (nothing committed) and no tick (no heartbeat). The
//! vendored copy heartbeats while it waits for its disk, but its timer restarted for every
//! flush and never fired when each took less than the interval: the followers heard nothing
//! for the whole queue and elected another leader. Now queued writes share one append and
//! flush, and the heartbeat deadline carries over from one flush to the next.

mod common;

use common::*;
use std::future::Future;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use switchyard_ledger::command::LedgerRequest;
use switchyard_ledger::{Command, LedgerNode};
use tempfile::TempDir;

/// Shorter than the heartbeat interval below.
const STALL: Duration = Duration::from_millis(120);

fn term(node: &LedgerNode) -> u64 {
    node.raft().metrics().borrow().current_term
}

fn flush_count(registry: &prometheus::Registry) -> u64 {
    registry
        .gather()
        .iter()
        .find(|family| family.name() == "switchyard_ledger_log_flush_seconds")
        .map(|family| family.get_metric()[0].get_histogram().get_sample_count())
        .expect("no switchyard_ledger_log_flush_seconds")
}

/// Three nodes with heartbeats every 200 ms; a follower stands after 1.0-1.2 s without one
/// (its leader lease, the maximum, plus a drawn election timeout). Returns the nodes, their
/// registries and the leader's index.
async fn group(dir: &TempDir) -> (Vec<LedgerNode>, Vec<prometheus::Registry>, usize) {
    let (nodes, registries) = group_with_registries(3, |id| {
        let mut config = config(id, dir, "127.0.0.1:0");
        config.raft.heartbeat_interval_ms = 200;
        config.raft.election_timeout_min_ms = 400;
        config.raft.election_timeout_max_ms = 600;
        config.write_timeout = Duration::from_secs(10);
        config
    })
    .await;
    let leader = leader_index(&nodes);
    (nodes, registries, leader)
}

fn assert_same_term(nodes: &[LedgerNode], before: u64) {
    for node in nodes {
        let now = term(node);
        eprintln!("FIGURE node {}: term {before} -> {now}", node.id());
        assert_eq!(
            now,
            before,
            "node {} saw an election while the leader was only slow to flush",
            node.id()
        );
    }
}

fn affinity(key: u64) -> LedgerRequest {
    let ts_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    LedgerRequest {
        ts_ms: u64::try_from(ts_ms).unwrap(),
        request_id: None,
        command: Command::RecordAffinity {
            prefix_key: key,
            prefix: "prefix".into(),
            worker: "w1".into(),
            displaced: Vec::new(),
            reason: "test".into(),
        },
    }
}

/// Writes arriving faster than one stalled flush per write can take (40/s against ~8/s):
/// queued writes share a flush, so each commits within a few flushes and the queue never
/// grows. One flush per write, the queue grew for as long as the load lasted and the last
/// writes waited ~20 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_writes_share_a_slow_flush() {
    const WRITES: u32 = 160;
    const EVERY: Duration = Duration::from_millis(25);
    let dir = TempDir::new().unwrap();
    let (nodes, registries, leader) = group(&dir).await;
    let term_before = term(&nodes[leader]);
    let flushes_before = flush_count(&registries[leader]);
    nodes[leader].test_log_flush_stall().set(STALL, None);
    let started = tokio::time::Instant::now();
    let writes = futures_util::future::join_all((0..WRITES).map(|i| {
        let node = &nodes[leader];
        async move {
            tokio::time::sleep_until(started + EVERY * i).await;
            let sent = Instant::now();
            let outcome = node
                .record_affinity(u64::from(i), "prefix", "w1", &[], "test")
                .await;
            (outcome, sent.elapsed())
        }
    }))
    .await;
    nodes[leader]
        .test_log_flush_stall()
        .set(Duration::ZERO, None);
    let flushes = flush_count(&registries[leader]) - flushes_before;
    let slowest = writes.iter().map(|(_, took)| *took).max().unwrap();
    let failed: Vec<_> = writes
        .iter()
        .filter_map(|(w, _)| w.as_ref().err())
        .collect();
    eprintln!(
        "FIGURE {WRITES} writes, one every {EVERY:?}, leader flushes stalled {STALL:?}: \
         {flushes} leader flushes, slowest write {slowest:?}, {} failed",
        failed.len()
    );
    assert!(failed.is_empty(), "writes failed: {failed:?}");
    assert!(
        slowest < Duration::from_secs(3),
        "a write waited {slowest:?}: the writes queued behind one flush each"
    );
    assert!(
        flushes < u64::from(WRITES) / 2,
        "{flushes} flushes for {WRITES} writes: the queued writes were not flushed together"
    );
    assert_same_term(&nodes, term_before);
    for node in nodes {
        node.shutdown().await;
    }
}

/// Writes that cannot share a flush (each followed in the queue by another request to the
/// core) keep the leader's core flushing back to back for ~4.8 s, four times the followers'
/// patience, with no tick handled in between: only heartbeats sent while it waits for its
/// disk keep the followers, and those must fall due across flushes each shorter than the
/// heartbeat interval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_short_flushes_keep_the_leader() {
    const WRITES: u64 = 40;
    let dir = TempDir::new().unwrap();
    let (nodes, registries, leader) = group(&dir).await;
    let term_before = term(&nodes[leader]);
    let flushes_before = flush_count(&registries[leader]);
    nodes[leader].test_log_flush_stall().set(STALL, None);
    let raft = nodes[leader].raft();
    let started = Instant::now();
    // Polled in order: each write is queued, then a request that ends its batch.
    let writes = futures_util::future::join_all((0..WRITES).map(|key| async move {
        let mut write = std::pin::pin!(raft.client_write(affinity(1000 + key)));
        let first = std::future::poll_fn(|cx| Poll::Ready(write.as_mut().poll(cx))).await;
        raft.external_request(|_| {});
        match first {
            Poll::Ready(outcome) => outcome.is_ok(),
            Poll::Pending => write.await.is_ok(),
        }
    }))
    .await;
    let drained = started.elapsed();
    nodes[leader]
        .test_log_flush_stall()
        .set(Duration::ZERO, None);
    let flushes = flush_count(&registries[leader]) - flushes_before;
    let failed = writes.iter().filter(|ok| !**ok).count();
    eprintln!(
        "FIGURE {WRITES} writes, each followed by a core request, leader flushes stalled \
         {STALL:?}: drained in {drained:?}, {flushes} leader flushes, {failed} failed"
    );
    assert!(
        STALL * u32::try_from(flushes).unwrap() > Duration::from_millis(2400),
        "only {flushes} stalled flushes: the writes did not keep the leader's core busy"
    );
    assert_same_term(&nodes, term_before);
    assert_eq!(failed, 0, "writes failed");
    for node in nodes {
        node.shutdown().await;
    }
}
