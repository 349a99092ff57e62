#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Figures on a 3-node loopback cluster: committed spend reports per second with many
//! writers (openraft batches them into shared fsyncs), and lease-renewal traffic per
//! replica while every replica serves a steady stream of requests.

mod common;

use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::{Priority, Purpose, QuotaLedger, QuotaScope};
use switchyard_ledger::command::{SpendReport, SpendTotals, SplitKey};
use switchyard_ledger::{BudgetSpec, Command, CommandResponse};
use tempfile::TempDir;

const WRITERS: u64 = 24;
const WINDOW: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_writes_per_second_and_lease_traffic() {
    let dir = TempDir::new().unwrap();
    let nodes = Arc::new(cluster(3, &dir).await);
    nodes[0]
        .set_budget(
            QuotaScope::caller("acme"),
            BudgetSpec::daily(1 << 40),
            "ops",
        )
        .await
        .unwrap();
    let committed = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for writer in 0..WRITERS {
        let (nodes, committed, stop) = (nodes.clone(), committed.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let node = &nodes[(writer % 3) as usize];
            let mut seq = 0;
            while !stop.load(Ordering::Relaxed) {
                seq += 1;
                let report = SpendReport {
                    node: 1_000 + writer,
                    boot_id: 1,
                    seq,
                    minute: 1,
                    lines: vec![(
                        SplitKey {
                            caller: "acme".into(),
                            purpose: Purpose::Business,
                            priority: Priority::P1,
                            under_override: false,
                        },
                        SpendTotals {
                            tokens: 10,
                            requests: 1,
                        },
                    )],
                };
                let answer = node.write(Command::ReportSpend(report)).await;
                if matches!(answer, Ok(CommandResponse::Spend { accepted: true })) {
                    committed.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    // Hot-path load on every replica at the same time, to count lease renewals.
    for node in nodes.iter() {
        let (quota, stop) = (node.quota(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let tags = tags("acme", Purpose::Business);
            while !stop.load(Ordering::Relaxed) {
                if let Ok(r) = quota.reserve(&tags, 100) {
                    quota.settle(r, 100);
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let grants_before = nodes[0].counters().await.unwrap().lease_grants;
    let writes_before = committed.load(Ordering::Relaxed);
    let started = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let writes = committed.load(Ordering::Relaxed) - writes_before;
    let elapsed = started.elapsed().as_secs_f64();
    let grants = nodes[0].counters().await.unwrap().lease_grants - grants_before;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.unwrap();
    }
    let per_second = writes as f64 / elapsed;
    eprintln!("FIGURE committed spend reports/s, 3 nodes, {WRITERS} writers: {per_second:.0}");
    eprintln!(
        "FIGURE lease renewals per replica per second under load: {:.2}",
        grants as f64 / elapsed / 3.0
    );
    assert!(per_second > 20.0, "only {per_second:.0} writes/s");
    assert!(grants > 0);
    let nodes = Arc::into_inner(nodes).unwrap();
    for node in nodes {
        node.shutdown().await;
    }
}
