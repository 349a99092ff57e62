#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Fleet-wide rate and concurrency on a real 3-node cluster: every replica enforces the share
//! its lease carries, so what the whole fleet admits stays within the budget's figures.

mod common;

use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::{Purpose, QuotaError, QuotaLedger, QuotaScope};
use switchyard_ledger::{BudgetSpec, LedgerNode, lease::BURST};
use tempfile::TempDir;

fn limited(rate_tokens_per_s: u64, max_concurrency: u64) -> BudgetSpec {
    BudgetSpec {
        rate_tokens_per_s,
        max_concurrency,
        max_debt_tokens: 0,
        max_lease_tokens: 0,
        ..BudgetSpec::daily(1_000_000_000)
    }
}

async fn budget_everywhere(nodes: &[LedgerNode], scope: &QuotaScope, spec: BudgetSpec) {
    nodes[0]
        .set_budget(scope.clone(), spec, "ops")
        .await
        .unwrap();
    await_leases(nodes, scope).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admitted_tokens_per_second_across_replicas_stay_within_the_global_rate() {
    const RATE: u64 = 2_000;
    const COST: u64 = 10;
    const RUN: Duration = Duration::from_secs(6);
    let dir = TempDir::new().unwrap();
    let nodes = cluster(3, &dir).await;
    let scope = QuotaScope::caller("acme");
    budget_everywhere(&nodes, &scope, limited(RATE, 0)).await;

    let start = Instant::now();
    let seconds = RUN.as_secs() as usize;
    // admitted[node][second] in tokens.
    let admitted: Arc<Vec<Vec<AtomicU64>>> = Arc::new(
        (0..nodes.len())
            .map(|_| (0..seconds).map(|_| AtomicU64::new(0)).collect())
            .collect(),
    );
    let rate_refusals = Arc::new(AtomicU64::new(0));
    let mut load = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let quota = node.quota();
        let (admitted, refusals) = (admitted.clone(), rate_refusals.clone());
        load.push(tokio::spawn(async move {
            let tags = tags("acme", Purpose::Business);
            loop {
                let second = start.elapsed().as_secs() as usize;
                if second >= seconds {
                    break;
                }
                match quota.reserve(&tags, COST) {
                    Ok(reservation) => {
                        admitted[i][second].fetch_add(COST, Ordering::Relaxed);
                        quota.settle(reservation, COST);
                    }
                    Err(QuotaError::Exhausted { .. } | QuotaError::FleetShare { .. }) => {
                        refusals.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(QuotaError::Unavailable { .. }) => {}
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }
    for task in load {
        task.await.unwrap();
    }

    let burst = (RATE as f64 * BURST.as_secs_f64()) as u64;
    // Each replica may let one request through on a full bucket beyond it.
    let slack = burst + COST * nodes.len() as u64;
    let per_second: Vec<u64> = (0..seconds)
        .map(|s| admitted.iter().map(|n| n[s].load(Ordering::Relaxed)).sum())
        .collect();
    let per_node: Vec<u64> = admitted
        .iter()
        .map(|n| n.iter().map(|s| s.load(Ordering::Relaxed)).sum())
        .collect();
    let total: u64 = per_second.iter().sum();
    println!(
        "rate {RATE}/s: tokens per second {per_second:?}, per node {per_node:?}, \
         total {total}, rate refusals {}",
        rate_refusals.load(Ordering::Relaxed)
    );
    for (s, tokens) in per_second.iter().enumerate() {
        assert!(
            *tokens <= RATE + slack,
            "second {s}: {tokens} tokens admitted across replicas, more than {RATE}/s + burst"
        );
    }
    assert!(
        total <= RATE * seconds as u64 + slack,
        "{total} tokens in {seconds} s exceed the global rate plus one burst"
    );
    assert!(
        rate_refusals.load(Ordering::Relaxed) > 0,
        "the load must push past the rate for the test to mean anything"
    );
    assert!(
        total >= RATE * seconds as u64 / 2,
        "the shares must be usable: only {total} tokens admitted in {seconds} s"
    );
    // Once the early holder has renewed twice, the others hold shares too.
    let late: Vec<u64> = admitted
        .iter()
        .map(|n| {
            n[seconds - 2..]
                .iter()
                .map(|s| s.load(Ordering::Relaxed))
                .sum()
        })
        .collect();
    assert!(
        late.iter().filter(|t| **t > 0).count() >= 2,
        "the rate is shared across replicas at the end: {late:?}"
    );
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_across_replicas_never_exceed_the_global_concurrency() {
    const LIMIT: u64 = 4;
    const RUN: Duration = Duration::from_secs(5);
    let dir = TempDir::new().unwrap();
    let nodes = cluster(3, &dir).await;
    let scope = QuotaScope::caller("acme");
    budget_everywhere(&nodes, &scope, limited(0, LIMIT)).await;

    let in_flight = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let admitted: Arc<Vec<AtomicU64>> =
        Arc::new((0..nodes.len()).map(|_| AtomicU64::new(0)).collect());
    let mut load = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        for _ in 0..LIMIT {
            let quota = node.quota();
            let (in_flight, peak, stop, admitted) = (
                in_flight.clone(),
                peak.clone(),
                stop.clone(),
                admitted.clone(),
            );
            load.push(tokio::spawn(async move {
                let tags = tags("acme", Purpose::Business);
                while !stop.load(Ordering::Relaxed) {
                    match quota.reserve(&tags, 1) {
                        Ok(reservation) => {
                            let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                            peak.fetch_max(now, Ordering::SeqCst);
                            admitted[i].fetch_add(1, Ordering::Relaxed);
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            in_flight.fetch_sub(1, Ordering::SeqCst);
                            quota.settle(reservation, 1);
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(2)).await,
                    }
                }
            }));
        }
    }
    tokio::time::sleep(RUN).await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    let admitted: Vec<u64> = admitted.iter().map(|a| a.load(Ordering::Relaxed)).collect();
    let peak = peak.load(Ordering::SeqCst);
    println!("concurrency {LIMIT}: peak in flight {peak}, admitted per node {admitted:?}");
    assert!(peak <= LIMIT, "{peak} requests in flight across replicas");
    assert_eq!(peak, LIMIT, "the whole limit is usable");
    assert!(
        admitted.iter().filter(|a| **a > 0).count() >= 2,
        "the concurrency is shared across replicas: {admitted:?}"
    );
    for node in &nodes {
        let (_, _, left) = node.quota().leases().share_snapshot(&scope).unwrap();
        assert_eq!(left, 0, "every slot is released on settle");
    }
    for node in nodes {
        node.shutdown().await;
    }
}
