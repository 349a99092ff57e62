#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Figure (ignored in CI, ~80 s): Raft writes per replica caused by lease renewals on a 3-node
//! loopback cluster under steady load, with the default lease settings (10 s TTL, renewal at
//! half the TTL or half the lease used, 200 ms checks). Once with a plain token budget, once
//! with fleet rate and concurrency shares on the same budget.
//!
//! `cargo nextest run -p switchyard-ledger --test lease_traffic --run-ignored all --no-capture`

mod common;

use common::*;
use prometheus::Registry;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::{Purpose, QuotaLedger, QuotaScope, SystemClock};
use switchyard_ledger::{BudgetSpec, LedgerConfig, LedgerNode};
use tempfile::TempDir;

const WARMUP: Duration = Duration::from_secs(8);
const WINDOW: Duration = Duration::from_secs(30);

/// Lease requests this node sent, by outcome.
fn lease_requests(registry: &Registry) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for family in registry.gather() {
        if family.name() != "switchyard_ledger_lease_requests_total" {
            continue;
        }
        for metric in family.get_metric() {
            let outcome = metric
                .get_label()
                .iter()
                .find(|l| l.name() == "outcome")
                .map(|l| l.value().to_owned())
                .unwrap_or_default();
            out.insert(outcome, metric.get_counter().get_value() as u64);
        }
    }
    out
}

async fn default_lease_cluster(dir: &TempDir) -> Vec<(LedgerNode, Registry)> {
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let mut config =
            LedgerConfig::new(id, "127.0.0.1:0", dir.path().join(format!("n{id}"))).for_tests();
        config.cluster_secret = SECRET.into();
        let registry = Registry::new();
        let node = LedgerNode::start(config, &registry, Arc::new(SystemClock))
            .await
            .unwrap();
        nodes.push((node, registry));
    }
    let members = nodes
        .iter()
        .map(|(n, _)| (n.id(), n.raft_addr().to_owned()))
        .collect();
    nodes[0].0.initialize(members).await.unwrap();
    for (node, _) in &nodes {
        node.wait_for_leader(Duration::from_secs(10)).await.unwrap();
    }
    nodes
}

/// Steady load of `per_node_rps` requests of 10 tokens on every replica; answers lease
/// requests per replica per second over the window, and what was admitted fleet-wide.
async fn measure(spec: BudgetSpec, per_node_rps: u64) -> (Vec<f64>, f64, u64) {
    let dir = TempDir::new().unwrap();
    let nodes = default_lease_cluster(&dir).await;
    let scope = QuotaScope::caller("acme");
    nodes[0]
        .0
        .set_budget(scope.clone(), spec, "ops")
        .await
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let admitted = Arc::new(AtomicU64::new(0));
    let mut load = Vec::new();
    for (node, _) in &nodes {
        let (quota, stop, admitted) = (node.quota(), stop.clone(), admitted.clone());
        load.push(tokio::spawn(async move {
            let tags = tags("acme", Purpose::Business);
            let mut ticker = tokio::time::interval(Duration::from_micros(1_000_000 / per_node_rps));
            while !stop.load(Ordering::Relaxed) {
                ticker.tick().await;
                if let Ok(r) = quota.reserve(&tags, 10) {
                    admitted.fetch_add(10, Ordering::Relaxed);
                    quota.settle(r, 10);
                }
            }
        }));
    }
    tokio::time::sleep(WARMUP).await;
    let before: Vec<u64> = nodes
        .iter()
        .map(|(_, r)| lease_requests(r).values().sum())
        .collect();
    let admitted_before = admitted.load(Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let elapsed = started.elapsed().as_secs_f64();
    let per_replica: Vec<f64> = nodes
        .iter()
        .zip(&before)
        .map(|((_, r), b)| (lease_requests(r).values().sum::<u64>() - b) as f64 / elapsed)
        .collect();
    let admitted_rate = (admitted.load(Ordering::Relaxed) - admitted_before) as f64 / elapsed;
    let outcomes: Vec<BTreeMap<String, u64>> =
        nodes.iter().map(|(_, r)| lease_requests(r)).collect();
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    eprintln!("lease requests by outcome per node (whole run): {outcomes:?}");
    let grants = nodes[0].0.counters().await.unwrap().lease_grants;
    for (node, _) in nodes {
        node.shutdown().await;
    }
    (per_replica, admitted_rate, grants)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figure run (~80 s): lease-renewal traffic per replica"]
async fn lease_renewal_writes_per_replica_under_steady_load() {
    const RPS: u64 = 200;
    let plain = BudgetSpec::daily(1 << 40);
    let (per_replica, tokens_per_s, grants) = measure(plain.clone(), RPS).await;
    eprintln!(
        "FIGURE lease-renewal writes/s per replica, token budget only, {RPS} req/s per replica: \
         {per_replica:.2?} (admitted {tokens_per_s:.0} tokens/s fleet-wide, {grants} grants applied)"
    );
    let shared = BudgetSpec {
        rate_tokens_per_s: 4_500,
        max_concurrency: 30,
        ..plain
    };
    let (per_replica_shares, tokens_per_s, grants) = measure(shared, RPS).await;
    eprintln!(
        "FIGURE lease-renewal writes/s per replica, with rate 4500 tokens/s + concurrency 30, \
         {RPS} req/s per replica: {per_replica_shares:.2?} (admitted {tokens_per_s:.0} tokens/s \
         fleet-wide, {grants} grants applied)"
    );
    for rate in per_replica.iter().chain(&per_replica_shares) {
        assert!(*rate < 5.0, "renewal traffic {rate:.2}/s per replica");
    }
}
