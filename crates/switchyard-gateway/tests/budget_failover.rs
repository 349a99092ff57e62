#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Three real gateway processes share one tenant's budget; the Raft leader is SIGKILLed
//! while clients keep sending to the two survivors. With a budget far from spent, every
//! answer must be 200: the survivors admit from their leases while a new leader is elected,
//! and a request whose lease runs dry waits (bounded) for the renewal that follows the
//! election instead of being refused 503 (or 429: the fleet still has budget).

mod common;

use common::*;
use std::time::{Duration, Instant};

const TENANT_KEY: &str = "sk-failover-tenant";

async fn cluster_view(base: &str) -> Option<serde_json::Value> {
    let reply = admin_get(base, ADMIN_KEY, "/admin/cluster").await;
    (reply.status == 200).then(|| reply.json())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_killed_under_load_costs_no_client_a_refusal() {
    let body = far_from_spent_tenant(TENANT_KEY);
    let mut group = ReplicaGroup::start((3, 60), "failover-test-cluster-secret", &body).await;
    let bases = group.bases.clone();
    let nodes = &mut group.nodes;

    let formed = eventually(Duration::from_secs(60), || async {
        cluster_view(&bases[0]).await.is_some_and(|view| {
            view["voters"].as_array().is_some_and(|v| v.len() == 3) && view["leader"].is_u64()
        })
    })
    .await;
    assert!(formed, "three voters and a leader");
    // Every replica holds a lease once it answers the tenant.
    for base in &bases {
        let serving = eventually(Duration::from_secs(30), || async {
            ask_chat(base, TENANT_KEY).await.0 == 200
        })
        .await;
        assert!(serving, "{base} never served the tenant");
    }
    let leader_id = cluster_view(&bases[0]).await.unwrap()["leader"]
        .as_u64()
        .unwrap();
    // spawn_three_replicas gives node ids 1, 2, 3 in order.
    let leader = usize::try_from(leader_id - 1).unwrap();
    let survivors: Vec<String> = (0..3)
        .filter(|i| *i != leader)
        .map(|i| bases[i].clone())
        .collect();

    let load = ChatLoad::start(&survivors, 2, TENANT_KEY, Duration::from_millis(10));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let killed_at = Instant::now();
    nodes[leader].child.start_kill().unwrap(); // SIGKILL
    let _ = nodes[leader].child.wait().await;
    let reelected = eventually(Duration::from_secs(20), || async {
        let mut leaders = Vec::new();
        for base in &survivors {
            leaders.push(cluster_view(base).await.and_then(|v| v["leader"].as_u64()));
        }
        leaders[0].is_some_and(|l| l != leader_id) && leaders[0] == leaders[1]
    })
    .await;
    let failover = killed_at.elapsed();
    assert!(reelected, "the survivors elected no new leader");
    // Long enough after the election for every lease to have been renewed under it.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let ChatLoadOutcome { outcomes, slowest } = load.finish().await;
    eprintln!(
        "FIGURE leader SIGKILL: new leader seen after {failover:?}; answers {outcomes:?}; \
         slowest {slowest:?}"
    );
    let served = outcomes.get("200 ").copied().unwrap_or(0);
    let total: u64 = outcomes.values().sum();
    assert!(served > 50, "too little load to judge: {outcomes:?}");
    // The bound: a request whose lease ran dry waits for a renewal up to `renewal_wait` (2 s;
    // a follower stands after 1.2-1.6 s without a leader), so a new leader seen within that
    // long of the kill covers every waiter. An election slower than that (a machine loaded far
    // beyond its cores) is reported, not judged: the refusals then are the bounded wait
    // working as specified.
    if failover > Duration::from_secs(2) {
        eprintln!("not judged: the election took {failover:?} (> renewal_wait)");
        return;
    }
    assert_eq!(
        served,
        total,
        "answers other than 200 while a quorum existed: {outcomes:?}\n{}",
        nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leader)
            .map(|(_, n)| n.log_tail())
            .collect::<Vec<_>>()
            .join("\n---\n")
    );
}
