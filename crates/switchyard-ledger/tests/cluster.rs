#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Multi-node behaviour on loopback with real disks: election, forwarding, linearizable
//! reads, affinity broadcast, restart from disk, snapshot catch-up, membership changes.

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{Purpose, QuotaScope, SystemClock};
use switchyard_ledger::{BudgetSpec, LedgerError};
use tempfile::TempDir;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_forward_writes_and_broadcast_affinity() {
    let dir = TempDir::new().unwrap();
    let nodes = cluster(3, &dir).await;
    let leader = leader_index(&nodes);
    let follower = &nodes[(leader + 1) % 3];
    let other = &nodes[(leader + 2) % 3];
    let mut affinity_rx = other.subscribe_affinity();

    // Written through a follower (forwarded), read linearizably through another follower.
    follower
        .set_budget(QuotaScope::caller("acme"), BudgetSpec::daily(50_000), "ops")
        .await
        .unwrap();
    let budgets = other.budgets().await.unwrap();
    assert_eq!(budgets.len(), 1);
    assert_eq!(budgets[0].spec.limit_tokens, 50_000);

    follower
        .record_affinity(
            0xabc,
            "",
            "worker-7",
            &[],
            "fallback from overloaded worker-2",
        )
        .await
        .unwrap();
    let record = tokio::time::timeout(Duration::from_secs(5), affinity_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (record.prefix_key, record.worker.as_str()),
        (0xabc, "worker-7")
    );
    for node in &nodes {
        assert!(
            eventually(Duration::from_secs(5), || node
                .affinity_records()
                .iter()
                .any(|r| r.prefix_key == 0xabc))
            .await
        );
    }
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_recovers_its_state_from_disk() {
    let dir = TempDir::new().unwrap();
    let node = start(1, &dir, "127.0.0.1:0", Arc::new(SystemClock)).await;
    let addr = node.raft_addr().to_owned();
    node.initialize_single().await.unwrap();
    node.wait_for_leader(Duration::from_secs(5)).await.unwrap();
    node.set_budget(QuotaScope::caller("acme"), BudgetSpec::daily(9_000), "ops")
        .await
        .unwrap();
    let id = node
        .propose_override(
            QuotaScope::caller("acme"),
            500,
            "launch day",
            Duration::from_secs(600),
            "alice",
        )
        .await
        .unwrap();
    for key in 0..300u64 {
        node.record_affinity(key, "", "w1", &[], "test")
            .await
            .unwrap();
    }
    // A crash, not a shutdown: nothing is flushed or released on the way out.
    node.crash().await;

    let node = start(1, &dir, &addr, Arc::new(SystemClock)).await;
    node.wait_for_leader(Duration::from_secs(5)).await.unwrap();
    let budgets = node.budgets().await.unwrap();
    assert_eq!(budgets[0].spec.limit_tokens, 9_000);
    let overrides = node.overrides().await.unwrap();
    assert_eq!(overrides[0].id, id);
    assert_eq!(node.affinity_records().len(), 300);
    assert!(node.status().last_applied >= 300);
    // And it keeps taking writes.
    node.record_affinity(1_000, "", "w2", &[], "after restart")
        .await
        .unwrap();
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_node_catches_up_by_snapshot() {
    let dir = TempDir::new().unwrap();
    let nodes = cluster(3, &dir).await;
    let leader = leader_index(&nodes);
    let lagging = (leader + 1) % 3;
    nodes[lagging].faults().isolate();
    // Snapshots every 200 entries keeping 20: the lagging node's next entry gets purged.
    for key in 0..450u64 {
        nodes[leader]
            .record_affinity(key, "", "w", &[], "load")
            .await
            .unwrap();
    }
    let leader_metrics = nodes[leader].raft().metrics().borrow().clone();
    let purged = leader_metrics.purged.map_or(0, |id| id.index);
    let lagging_applied = nodes[lagging].status().last_applied;
    assert!(
        purged > lagging_applied,
        "leader purged up to {purged}, lagging node applied {lagging_applied}"
    );
    nodes[lagging].faults().heal();
    let target = nodes[leader].status().last_applied;
    assert!(
        eventually(Duration::from_secs(15), || nodes[lagging]
            .status()
            .last_applied
            >= target)
        .await,
        "lagging node did not catch up"
    );
    let snapshot = nodes[lagging].raft().metrics().borrow().snapshot;
    assert!(snapshot.is_some_and(|id| id.index > lagging_applied));
    assert_eq!(nodes[lagging].affinity_records().len(), 450);
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_grows_by_learners_and_promotion_and_shrinks_by_removal() {
    let dir = TempDir::new().unwrap();
    let first = start(1, &dir, "127.0.0.1:0", Arc::new(SystemClock)).await;
    first.initialize_single().await.unwrap();
    first.wait_for_leader(Duration::from_secs(5)).await.unwrap();
    let mut others = Vec::new();
    for id in 2..=4 {
        let node = start(id, &dir, "127.0.0.1:0", Arc::new(SystemClock)).await;
        first.add_learner(id, node.raft_addr()).await.unwrap();
        others.push(node);
    }
    first.promote(2).await.unwrap();
    first.promote(3).await.unwrap();
    let status = first.status();
    assert_eq!(status.voters, vec![1, 2, 3]);
    assert_eq!(status.members.len(), 4);
    assert_eq!(others[2].status().role, "learner");

    // A learner replicates and forwards writes.
    others[2]
        .record_affinity(42, "", "w9", &[], "learner write")
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(5), || others[2]
            .affinity_records()
            .iter()
            .any(|r| r.prefix_key == 42))
        .await
    );

    // Swap voter 3 for node 4 (through a follower: forwarded to the leader).
    others[0].remove(3).await.unwrap();
    others[0].promote(4).await.unwrap();
    assert!(
        eventually(Duration::from_secs(5), || first.status().voters
            == vec![1, 2, 4])
        .await,
        "voters are {:?}",
        first.status().voters
    );
    assert!(!first.status().members.contains_key(&3));
    for node in others {
        node.shutdown().await;
    }
    first.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_cluster_secret_is_refused() {
    let dir = TempDir::new().unwrap();
    let node = start(1, &dir, "127.0.0.1:0", Arc::new(SystemClock)).await;
    node.initialize_single().await.unwrap();
    node.wait_for_leader(Duration::from_secs(5)).await.unwrap();
    let client = switchyard_ledger::LedgerClient::new(
        vec![node.raft_addr().to_owned()],
        "wrong",
        Duration::from_millis(500),
    );
    let result = client.write(&switchyard_ledger::Command::Tick).await;
    assert!(
        matches!(&result, Err(LedgerError::Unreachable(e)) if e.contains("401")),
        "{result:?}"
    );
    let client = switchyard_ledger::LedgerClient::new(
        vec![node.raft_addr().to_owned()],
        SECRET,
        Duration::from_millis(500),
    );
    client
        .write(&switchyard_ledger::Command::Tick)
        .await
        .unwrap();
    let _ = Purpose::Business;
    node.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_show_role_indexes_and_hot_path_decisions() {
    use switchyard_core::QuotaLedger;
    let dir = TempDir::new().unwrap();
    let registry = prometheus::Registry::new();
    let node = switchyard_ledger::LedgerNode::start(
        config(1, &dir, "127.0.0.1:0"),
        &registry,
        Arc::new(SystemClock),
    )
    .await
    .unwrap();
    node.initialize_single().await.unwrap();
    node.wait_for_leader(Duration::from_secs(5)).await.unwrap();
    node.set_budget(
        QuotaScope::caller("acme"),
        BudgetSpec::daily(100_000),
        "ops",
    )
    .await
    .unwrap();
    let quota = node.quota();
    let budgeted = tags("acme", Purpose::Business);
    assert!(
        eventually(Duration::from_secs(5), || quota
            .reserve(&budgeted, 10)
            .map(|r| quota.settle(r, 10))
            .is_ok())
        .await
    );
    let free = quota.reserve(&tags("free", Purpose::Warmup), 5).unwrap();
    quota.settle(free, 5);
    // Sums the samples of `name` (with the label, if given) from the text exposition.
    let value = |name: &str, label: Option<(&str, &str)>| -> f64 {
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&registry.gather())
            .unwrap();
        text.lines()
            .filter(|line| {
                line.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
            })
            .filter(|line| label.is_none_or(|(k, v)| line.contains(&format!("{k}=\"{v}\""))))
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    assert!(
        eventually(Duration::from_secs(3), || value(
            "switchyard_ledger_raft_role",
            Some(("role", "leader"))
        ) == 1.0
            && value("switchyard_ledger_raft_applied_index", None) >= 2.0)
        .await
    );
    assert!(value("switchyard_ledger_raft_commit_index", None) >= 2.0);
    assert!(
        value(
            "switchyard_ledger_reserve_decisions_total",
            Some(("decision", "lease"))
        ) >= 1.0
    );
    assert_eq!(
        value(
            "switchyard_ledger_reserve_decisions_total",
            Some(("decision", "unbudgeted"))
        ),
        1.0
    );
    assert_eq!(
        value(
            "switchyard_ledger_spend_tokens_total",
            Some(("purpose", "warmup"))
        ),
        5.0
    );
    assert!(
        value(
            "switchyard_ledger_lease_requests_total",
            Some(("outcome", "granted"))
        ) >= 1.0
    );
    assert!(
        value(
            "switchyard_ledger_lease_remaining_tokens",
            Some(("pool", "acme"))
        ) > 0.0
    );
    assert_eq!(
        value("switchyard_ledger_invariant_violations_total", None),
        0.0
    );
    node.shutdown().await;
}
