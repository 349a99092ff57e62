//! In-process clusters on loopback with real disks (temp dirs) for the integration tests.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_core::{Clock, Priority, Purpose, QuotaScope, SpendTags, SystemClock};
use switchyard_ledger::{LedgerConfig, LedgerError, LedgerNode};
use tempfile::TempDir;

pub const SECRET: &str = "test-secret";

pub fn config(id: u64, dir: &TempDir, addr: &str) -> LedgerConfig {
    let mut config = LedgerConfig::new(id, addr, dir.path().join(format!("n{id}"))).for_tests();
    config.cluster_secret = SECRET.into();
    config.lease.ttl = Duration::from_secs(3);
    config.lease.safety_margin = Duration::from_millis(500);
    config.lease.check_interval = Duration::from_millis(50);
    config.lease.min_demand_tokens = 500;
    config.tick_interval = Duration::from_millis(200);
    config.spend_flush_interval = Duration::from_millis(200);
    config.write_timeout = Duration::from_millis(1500);
    config
}

pub async fn start(id: u64, dir: &TempDir, addr: &str, clock: Arc<dyn Clock>) -> LedgerNode {
    start_with(config(id, dir, addr), clock).await
}

/// Starts a node; after an in-process stop, openraft's tasks may hold the database file a
/// moment longer, so opening it again is retried briefly.
pub async fn start_with(config: LedgerConfig, clock: Arc<dyn Clock>) -> LedgerNode {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match LedgerNode::start(config.clone(), &prometheus::Registry::new(), clock.clone()).await {
            Ok(node) => return node,
            Err(LedgerError::Store(e)) if Instant::now() < deadline && e.is_already_open() => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("node {} did not start: {e}", config.node_id),
        }
    }
}

/// `n` nodes, all voters, initialized through node 1; waits for a leader.
pub async fn cluster(n: u64, dir: &TempDir) -> Vec<LedgerNode> {
    let mut nodes = Vec::new();
    for id in 1..=n {
        nodes.push(start(id, dir, "127.0.0.1:0", Arc::new(SystemClock)).await);
    }
    form_group(&nodes).await;
    nodes
}

/// Makes started `nodes` one group, all voters, initialized through the first; waits until
/// every node knows a leader.
pub async fn form_group(nodes: &[LedgerNode]) {
    let members: BTreeMap<u64, String> = nodes
        .iter()
        .map(|n| (n.id(), n.raft_addr().to_owned()))
        .collect();
    nodes[0].initialize(members).await.unwrap();
    for node in nodes {
        node.wait_for_leader(Duration::from_secs(10)).await.unwrap();
    }
}

pub fn leader_index(nodes: &[LedgerNode]) -> usize {
    let leader = nodes[0].status().leader.unwrap();
    nodes.iter().position(|n| n.id() == leader).unwrap()
}

pub fn tags(caller: &str, purpose: Purpose) -> SpendTags {
    SpendTags {
        scope: QuotaScope::caller(caller),
        purpose,
        priority: Priority::P1,
    }
}

/// Polls `check` until it holds or `timeout` passes.
pub async fn eventually(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    check()
}

/// Starts nodes 1..=`n` with the config `make` gives each (system clock) and forms them into
/// one group.
pub async fn group_with(n: u64, make: impl Fn(u64) -> LedgerConfig) -> Vec<LedgerNode> {
    let mut nodes = Vec::new();
    for id in 1..=n {
        nodes.push(start_with(make(id), Arc::new(SystemClock)).await);
    }
    form_group(&nodes).await;
    nodes
}

/// As [`group_with`], each node with its own metrics registry (returned in node order).
pub async fn group_with_registries(
    n: u64,
    make: impl Fn(u64) -> LedgerConfig,
) -> (Vec<LedgerNode>, Vec<prometheus::Registry>) {
    let mut nodes = Vec::new();
    let mut registries = Vec::new();
    for id in 1..=n {
        let registry = prometheus::Registry::new();
        nodes.push(
            LedgerNode::start(make(id), &registry, Arc::new(SystemClock))
                .await
                .unwrap(),
        );
        registries.push(registry);
    }
    form_group(&nodes).await;
    (nodes, registries)
}

/// Waits until every node holds a granted lease on `scope`.
pub async fn await_leases(nodes: &[LedgerNode], scope: &QuotaScope) {
    for node in nodes {
        let table = node.quota().leases().clone();
        assert!(
            eventually(Duration::from_secs(5), || table
                .lease_snapshot(scope)
                .is_some_and(|l| l.epoch.is_some()))
            .await,
            "node {} got no lease on {scope}",
            node.id()
        );
    }
}
