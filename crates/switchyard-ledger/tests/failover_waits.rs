#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A leader crash under load while the survivors' leases run dry: their renewals find no
//! leader until one is elected, and give up (the write timeout is shorter than the election
//! here, as it is on a loaded machine). Requests must wait for the renewal that follows the
//! election instead of being refused: a quorum exists the whole time.

mod common;

use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::{Purpose, QuotaLedger, QuotaScope};
use switchyard_ledger::{BudgetSpec, LedgerConfig};
use tempfile::TempDir;

#[derive(Default)]
struct Tally {
    admitted: AtomicU64,
    refused: AtomicU64,
    /// Longest a request waited, in microseconds.
    longest_wait_us: AtomicU64,
}

fn failover_config(id: u64, dir: &TempDir) -> LedgerConfig {
    let mut config = config(id, dir, "127.0.0.1:0");
    // An election takes longer than one renewal attempt: every renewal in the gap fails.
    config.raft.election_timeout_min_ms = 1500;
    config.raft.election_timeout_max_ms = 2000;
    config.write_timeout = Duration::from_millis(500);
    // Leases hold a fraction of a second of spend, so they run dry during the election.
    config.lease.spend_window = Duration::from_millis(300);
    config.lease.min_demand_tokens = 100;
    config.lease.renewal_wait = Duration::from_secs(6);
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_wait_through_an_election_instead_of_failing() {
    let dir = TempDir::new().unwrap();
    let mut nodes = group_with(3, |id| failover_config(id, &dir)).await;
    let scope = QuotaScope::caller("acme");
    nodes[0]
        .set_budget(scope.clone(), BudgetSpec::daily(100_000_000), "ops")
        .await
        .unwrap();
    await_leases(&nodes, &scope).await;
    let leader = leader_index(&nodes);
    let old = nodes.remove(leader);
    let old_id = old.id();

    let tally = Arc::new(Tally::default());
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for node in &nodes {
        let quota = node.quota();
        let (tally, stop) = (tally.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let tags = tags("acme", Purpose::Business);
            while !stop.load(Ordering::Relaxed) {
                let asked = Instant::now();
                let answer = quota.reserve_or_wait(&tags, 10).await;
                let waited = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
                tally.longest_wait_us.fetch_max(waited, Ordering::Relaxed);
                match answer {
                    Ok(reservation) => {
                        tally.admitted.fetch_add(1, Ordering::Relaxed);
                        quota.settle(reservation, 10);
                    }
                    Err(error) => {
                        eprintln!("refused: {error:?}");
                        tally.refused.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;
    let crashed_at = Instant::now();
    old.crash().await;
    let elected = eventually(Duration::from_secs(10), || {
        let seen = nodes[0].status().leader;
        seen.is_some() && seen != Some(old_id) && nodes[1].status().leader == seen
    })
    .await;
    assert!(elected, "no new leader");
    eprintln!("FIGURE crash to new leader: {:?}", crashed_at.elapsed());
    // Long enough after the election for every waiting request to have its answer.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    for task in load {
        task.await.unwrap();
    }
    let longest = Duration::from_micros(tally.longest_wait_us.load(Ordering::Relaxed));
    eprintln!(
        "FIGURE admitted {}, refused {}, longest wait {longest:?}",
        tally.admitted.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed)
    );
    // The leases did run dry: some request waited for the election.
    assert!(
        longest >= Duration::from_millis(500),
        "no request waited ({longest:?}): the test did not exercise the gap"
    );
    assert_eq!(
        tally.refused.load(Ordering::Relaxed),
        0,
        "requests were refused while a quorum existed"
    );
    for node in nodes {
        node.shutdown().await;
    }
}
