#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A leader whose disk stalls in every log flush keeps its followers. openraft 0.9 awaits each
//! flush in the task that also sends heartbeats; a stall longer than the followers' patience
//! (1.2–1.6 s with the default timings) deposed a live leader, and requests waiting for a
//! lease saw no leader at all (503). The vendored openraft keeps heartbeating meanwhile.

mod common;

use common::*;
use std::time::{Duration, Instant};
use switchyard_ledger::{LedgerNode, RaftTimings};
use tempfile::TempDir;

const STALL: Duration = Duration::from_millis(1500);

fn term(node: &LedgerNode) -> u64 {
    node.raft().metrics().borrow().current_term
}

fn flushes(registry: &prometheus::Registry) -> (u64, f64) {
    for family in registry.gather() {
        if family.name() == "switchyard_ledger_log_flush_seconds" {
            let histogram = family.get_metric()[0].get_histogram();
            return (histogram.get_sample_count(), histogram.get_sample_sum());
        }
    }
    panic!("no switchyard_ledger_log_flush_seconds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stalled_in_every_flush_keeps_its_term() {
    let dir = TempDir::new().unwrap();
    let (nodes, registries) = group_with_registries(3, |id| {
        let mut config = config(id, &dir, "127.0.0.1:0");
        // The production timings: followers stand after 1.2–1.6 s without a heartbeat.
        config.raft = RaftTimings::default();
        config.write_timeout = Duration::from_secs(10);
        config
    })
    .await;
    let leader = leader_index(&nodes);
    let term_before = term(&nodes[leader]);
    // One shared disk: every replica's flushes stall, the leader's included.
    for node in &nodes {
        node.test_log_flush_stall().set(STALL, None);
    }
    // Five disk stalls, 2.5 s apart, as when other work on the machine floods the disk: every
    // flush that starts in the first 300 ms of an episode sleeps 1.5 s first, on every
    // replica (one shared disk). Writers of their own (lease keepers, ticks) keep flushing.
    let started = Instant::now();
    let mut writes = Vec::new();
    for episode in 0..5u64 {
        for node in &nodes {
            node.test_log_flush_stall().set(STALL, None);
        }
        let write = nodes[leader].record_affinity(episode + 1, "prefix", "w1", &[], "test");
        let (outcome, ()) = tokio::join!(write, async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            for node in &nodes {
                node.test_log_flush_stall().set(Duration::ZERO, None);
            }
        });
        writes.push(outcome.is_ok());
        let next = started + Duration::from_millis(2500) * u32::try_from(episode + 1).unwrap();
        tokio::time::sleep_until(next.into()).await;
    }
    let (count, sum) = registries
        .iter()
        .map(flushes)
        .fold((0, 0.0), |(n, s), (count, sum)| (n + count, s + sum));
    eprintln!(
        "FIGURE writes committed through the stalls {writes:?}; flushes on the three \
         replicas {count}, {sum:.1} s in all"
    );
    for node in &nodes {
        let now = term(node);
        eprintln!("FIGURE node {}: term {term_before} -> {now}", node.id());
        assert_eq!(
            now,
            term_before,
            "node {} saw an election while the leader was only slow to flush",
            node.id()
        );
    }
    assert!(
        sum >= STALL.as_secs_f64() * 5.0,
        "the stalls were not injected"
    );
    assert!(writes.iter().all(|ok| *ok), "a write failed: {writes:?}");
    for node in nodes {
        node.shutdown().await;
    }
}
