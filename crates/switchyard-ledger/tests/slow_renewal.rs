#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A renewal that is merely slow (the leader's disk stalls every flush) must not be answered
//! as a spent budget: a tenant far from its limit whose request waited out `renewal_wait`
//! gets 503 `quota_lease_pending` (retry), never 429 `budget_exhausted`.

mod common;

use common::*;
use std::time::{Duration, Instant};
use switchyard_core::{Purpose, QuotaError, QuotaLedger, QuotaScope};
use switchyard_ledger::{BudgetSpec, LedgerConfig};
use tempfile::TempDir;

/// Every flush of the leader sleeps this long: a renewal commits after it, well past the
/// request's wait and well inside the write timeout (so the ledger stays reachable).
const STALL: Duration = Duration::from_millis(2_500);
const WAIT: Duration = Duration::from_secs(1);

fn slow_disk_config(id: u64, dir: &TempDir) -> LedgerConfig {
    let mut config = config(id, dir, "127.0.0.1:0");
    config.write_timeout = Duration::from_secs(5);
    config.lease.renewal_wait = WAIT;
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_renewal_is_a_retry_not_a_spent_budget() {
    let dir = TempDir::new().unwrap();
    let nodes = group_with(3, |id| slow_disk_config(id, &dir)).await;
    let scope = QuotaScope::caller("acme");
    nodes[0]
        .set_budget(scope.clone(), BudgetSpec::daily(100_000_000), "ops")
        .await
        .unwrap();
    let leader = leader_index(&nodes);
    let follower = (leader + 1) % nodes.len();
    let table = nodes[follower].quota().leases().clone();
    assert!(
        eventually(Duration::from_secs(5), || table
            .lease_snapshot(&scope)
            .is_some_and(|l| l.epoch.is_some()))
        .await
    );
    let held = table.lease_snapshot(&scope).unwrap();
    let remaining = held.granted_total - held.used_total;

    nodes[leader].test_log_flush_stall().set(STALL, None);
    // More than the follower's lease holds, a sliver of the budget: the lease is short, the
    // renewal it triggers commits only after the leader's stalled flush.
    let tokens = remaining + 10_000;
    let quota = nodes[follower].quota();
    let asked = Instant::now();
    let answer = quota
        .reserve_or_wait(&tags("acme", Purpose::Business), tokens)
        .await;
    let waited = asked.elapsed();
    nodes[leader]
        .test_log_flush_stall()
        .set(Duration::ZERO, None);
    eprintln!("FIGURE waited {waited:?} for {tokens} tokens: {answer:?}");
    assert!(waited >= WAIT, "the request did not wait for the renewal");
    match answer {
        Err(QuotaError::Unavailable { reason }) => assert_eq!(reason, "quota_lease_pending"),
        other => panic!("expected a 503 to retry, got {other:?}"),
    }
    assert!(
        nodes[follower].quota().leases().ledger_reachable(),
        "the ledger stayed reachable: the renewal was slow, not failed"
    );
    // Once the disk is back the same request is served.
    let served = eventually(Duration::from_secs(10), || {
        quota
            .reserve(&tags("acme", Purpose::Business), tokens)
            .map(|r| quota.settle(r, 0))
            .is_ok()
    })
    .await;
    assert!(served, "the request was never served after the stall");
    for node in nodes {
        node.shutdown().await;
    }
}
