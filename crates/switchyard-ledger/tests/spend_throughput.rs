#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Figure (ignored by default): per-request spend reports committed per second on three
//! loopback nodes. Every settled request is one spend report; each replica folds its reports
//! into one replicated batch per flush interval, so the Raft log carries a handful of entries
//! per second however many requests are settled.
//!
//! `cargo nextest run -p switchyard-ledger --test spend_throughput --run-ignored all --no-capture`

mod common;

use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::{Purpose, QuotaLedger, QuotaScope};
use switchyard_ledger::BudgetSpec;
use tempfile::TempDir;

const WINDOW: Duration = Duration::from_secs(3);
const TASKS_PER_NODE: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figure: run explicitly"]
async fn per_request_spend_reports_committed_per_second() {
    let dir = TempDir::new().unwrap();
    let nodes = Arc::new(cluster(3, &dir).await);
    let scope = QuotaScope::caller("acme");
    nodes[0]
        .set_budget(scope.clone(), BudgetSpec::daily(1 << 50), "ops")
        .await
        .unwrap();
    for node in nodes.iter() {
        let table = node.quota().leases().clone();
        assert!(
            eventually(Duration::from_secs(5), || table
                .lease_snapshot(&scope)
                .is_some_and(|l| l.epoch.is_some()))
            .await
        );
    }
    let settled = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for node in nodes.iter() {
        for _ in 0..TASKS_PER_NODE {
            let (quota, settled, stop) = (node.quota(), settled.clone(), stop.clone());
            tasks.push(tokio::spawn(async move {
                let tags = tags("acme", Purpose::Business);
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(r) = quota.reserve_or_wait(&tags, 10).await {
                        quota.settle(r, 10);
                        settled.fetch_add(1, Ordering::Relaxed);
                    }
                    n += 1;
                    if n.is_multiple_of(256) {
                        tokio::task::yield_now().await;
                    }
                }
            }));
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = nodes[0].spend_ratios().await.unwrap().total_requests;
    let started = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let after = nodes[0].spend_ratios().await.unwrap().total_requests;
    let elapsed = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let per_second = (after - before) as f64 / elapsed;
    eprintln!(
        "FIGURE per-request spend reports committed/s, 3 nodes: {per_second:.0} \
         (settled on the hot path: {:.0}/s)",
        settled.load(Ordering::Relaxed) as f64 / (elapsed + 0.5)
    );
    // Everything settled is eventually committed, once.
    let total = settled.load(Ordering::Relaxed);
    assert!(
        eventually(Duration::from_secs(10), || {
            nodes[0].with_applied_state(|s| s.spend.ratios().total_requests) == total
        })
        .await,
        "committed spend differs from what was settled"
    );
    assert!(per_second >= 20_000.0, "only {per_second:.0} reports/s");
    let nodes = Arc::into_inner(nodes).unwrap();
    for node in nodes {
        node.shutdown().await;
    }
}
