#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The whole budget is usable: three replicas serving concurrent requests through
//! `reserve_or_wait` never see "unavailable" while the ledger is reachable (a request whose
//! lease ran dry waits for the renewal it triggered), and together they spend all but a few
//! requests' worth of the budget before every replica refuses with "exhausted".

mod common;

use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use switchyard_core::{Purpose, QuotaError, QuotaLedger, QuotaScope};
use switchyard_ledger::{BudgetSpec, LedgerNode};
use tempfile::TempDir;

const REQUEST: u64 = 100;

#[derive(Default)]
struct Tally {
    admitted_tokens: AtomicU64,
    exhausted: AtomicU64,
    unavailable: AtomicU64,
}

/// `tasks` concurrent clients per node, each sending requests one after another until the
/// budget refuses it (or `max_requests`).
async fn drive(
    nodes: &[LedgerNode],
    tasks: usize,
    max_requests: usize,
    pause: Duration,
) -> Arc<Tally> {
    let tally = Arc::new(Tally::default());
    let mut load = Vec::new();
    for node in nodes {
        for _ in 0..tasks {
            let (quota, tally) = (node.quota(), tally.clone());
            load.push(tokio::spawn(async move {
                let tags = tags("acme", Purpose::Business);
                for _ in 0..max_requests {
                    match quota.reserve_or_wait(&tags, REQUEST).await {
                        Ok(reservation) => {
                            tally.admitted_tokens.fetch_add(REQUEST, Ordering::Relaxed);
                            quota.settle(reservation, REQUEST);
                        }
                        Err(QuotaError::Exhausted { .. }) => {
                            tally.exhausted.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        Err(other) => {
                            tally.unavailable.fetch_add(1, Ordering::Relaxed);
                            eprintln!("refused: {other}");
                        }
                    }
                    tokio::time::sleep(pause).await;
                }
            }));
        }
    }
    for task in load {
        task.await.unwrap();
    }
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_running_dry_under_load_make_requests_wait_not_fail() {
    let dir = TempDir::new().unwrap();
    let nodes = cluster(3, &dir).await;
    let scope = QuotaScope::caller("acme");
    nodes[0]
        .set_budget(scope.clone(), BudgetSpec::daily(10_000_000), "ops")
        .await
        .unwrap();
    await_leases(&nodes, &scope).await;
    // Leases start at the 500-token minimum demand: 20 clients per node drain one in a
    // few requests, many times over.
    let tally = drive(&nodes, 20, 25, Duration::from_millis(2)).await;
    assert_eq!(tally.unavailable.load(Ordering::Relaxed), 0);
    assert_eq!(tally.exhausted.load(Ordering::Relaxed), 0);
    assert_eq!(
        tally.admitted_tokens.load(Ordering::Relaxed),
        3 * 20 * 25 * REQUEST
    );
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_spend_nearly_the_whole_budget_and_never_more() {
    const LIMIT: u64 = 60_000;
    let dir = TempDir::new().unwrap();
    let nodes = cluster(3, &dir).await;
    let scope = QuotaScope::caller("acme");
    let spec = BudgetSpec {
        max_debt_tokens: LIMIT / 1000,
        max_lease_tokens: 0,
        ..BudgetSpec::daily(LIMIT)
    };
    nodes[0]
        .set_budget(scope.clone(), spec, "ops")
        .await
        .unwrap();
    await_leases(&nodes, &scope).await;
    let tally = drive(&nodes, 4, usize::MAX, Duration::from_millis(5)).await;
    let admitted = tally.admitted_tokens.load(Ordering::Relaxed);
    assert_eq!(tally.unavailable.load(Ordering::Relaxed), 0, "no 503s");
    assert_eq!(
        tally.exhausted.load(Ordering::Relaxed),
        12,
        "every client ends refused"
    );
    assert!(admitted <= LIMIT, "admitted {admitted} of {LIMIT}");
    assert!(
        admitted as f64 >= 0.97 * LIMIT as f64,
        "only {admitted} of {LIMIT} admitted"
    );
    // Every replica ends with the same spend once the reports are in.
    let settled = eventually(Duration::from_secs(10), || {
        nodes.iter().all(|n| {
            n.view().budget(&scope).is_some_and(|p| {
                p.spent >= admitted
                    && p.committed == nodes[0].view().budget(&scope).unwrap().committed
            })
        })
    })
    .await;
    assert!(settled, "replicas disagree or spend missing");
    for node in nodes {
        node.shutdown().await;
    }
}
