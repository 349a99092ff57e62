#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A Raft leader that drains hands leadership over before it stops: three replicas in one
//! process with a static member list, the leader runs the shutdown phases, and a successor
//! is elected while it still votes.

mod common;

use common::*;
use std::path::Path;
use std::time::Duration;
use switchyard_gateway::GatewayHandle;
use switchyard_gateway::cluster::ClusterMember;
use switchyard_gateway::lifecycle::{DrainPlan, Handover};
use switchyard_sim::SimWorker;

/// Stops the leader's intake at once, drains for 1 s and hands leadership over within 10 s.
const HANDOVER_PLAN: DrainPlan = DrainPlan {
    accept: Duration::ZERO,
    drain: Duration::from_secs(1),
    handover: Duration::from_secs(10),
};

/// Three in-process gateways in front of `sims`, one Raft group with a static member list
/// (data under `dir`), once they agree on a leader.
async fn three_in_one_group(sims: &[SimWorker], dir: &Path) -> Vec<GatewayHandle> {
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let members: Vec<ClusterMember> = addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| ClusterMember {
            id: i as u64 + 1,
            addr: addr.clone(),
        })
        .collect();
    let mut gateways = Vec::new();
    for (i, addr) in addrs.iter().enumerate() {
        let mut config = config_for(sims, "round_robin");
        config.cluster.node_id = i as u64 + 1;
        config.cluster.raft_addr = addr.clone();
        config.cluster.secret = "handover-test-secret".into();
        config.cluster.members = members.clone();
        config.cluster.data_dir = dir.join(format!("n{i}")).display().to_string();
        gateways.push(switchyard_gateway::start(config, None).await.unwrap());
    }
    let formed = eventually(Duration::from_secs(30), || async {
        let leaders: Vec<_> = gateways.iter().map(leader_of).collect();
        leaders[0].is_some() && leaders.iter().all(|l| *l == leaders[0])
    })
    .await;
    assert!(formed, "the group never agreed on a leader");
    gateways
}

fn leader_of(gateway: &GatewayHandle) -> Option<u64> {
    gateway.state().cluster.as_ref().unwrap().status().leader
}

/// Where node `id` is among `gateways`.
fn index_of(gateways: &[GatewayHandle], id: u64) -> usize {
    gateways
        .iter()
        .position(|g| g.state().cluster.as_ref().unwrap().id() == id)
        .unwrap()
}

/// Every survivor follows `successor`; then they stop.
async fn survivors_follow(gateways: Vec<GatewayHandle>, successor: u64) {
    let agreed = eventually(Duration::from_secs(10), || async {
        gateways.iter().all(|g| leader_of(g) == Some(successor))
    })
    .await;
    assert!(agreed, "the survivors do not follow node {successor}");
    for gateway in gateways {
        gateway.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_leader_hands_leadership_to_a_follower() {
    let sims = start_sims(1).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gateways = three_in_one_group(&sims, dir.path()).await;
    let old = leader_of(&gateways[0]).unwrap();
    let index = index_of(&gateways, old);
    let leader = gateways.remove(index);

    let outcome = leader.drain_and_stop(HANDOVER_PLAN).await;
    let Handover::HandedOver(successor) = outcome else {
        panic!("leadership was not handed over: {outcome:?}");
    };
    assert_ne!(successor, old);
    survivors_follow(gateways, successor).await;
}

/// Steady ledger writes from every replica keep reaching the leader while it steps down. Each
/// replicated write would refresh the followers' lease and hold the election off, so a
/// stepping-down leader must stop taking them (they wait and go to the successor).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_hands_over_under_steady_write_traffic() {
    let sims = start_sims(1).await;
    let dir = tempfile::tempdir().unwrap();
    let mut gateways = three_in_one_group(&sims, dir.path()).await;
    let old = leader_of(&gateways[0]).unwrap();

    // Four writers on each replica, each writing again 20 ms after its last write committed:
    // entries reach the followers far more often than an election timeout.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = Vec::new();
    for (i, gateway) in gateways.iter().enumerate().flat_map(|(i, g)| [(i, g); 4]) {
        let node = gateway.state().cluster.clone().unwrap();
        let stop = stop.clone();
        writers.push((
            i,
            tokio::spawn(async move {
                let (mut ok, mut failed) = (0u64, 0u64);
                let mut n = 0u64;
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    n += 1;
                    let key = (i as u64) << 32 | rand_key(n);
                    match node
                        .record_affinity(key, "prefix", "sim-0", &[], "load")
                        .await
                    {
                        Ok(()) => ok += 1,
                        Err(_) => failed += 1,
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                (ok, failed)
            }),
        ));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;

    let index = index_of(&gateways, old);
    let leader = gateways.remove(index);
    let started = std::time::Instant::now();
    let outcome = leader.drain_and_stop(HANDOVER_PLAN).await;
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    // (ok, failed) per replica.
    let mut results = vec![(0u64, 0u64); 3];
    for (i, writer) in writers {
        let (ok, failed) = writer.await.unwrap();
        results[i].0 += ok;
        results[i].1 += failed;
    }
    eprintln!(
        "handover under writes: {outcome:?} after {took:?}; writes (ok, failed) per replica {results:?}"
    );
    let Handover::HandedOver(successor) = outcome else {
        panic!("leadership was not handed over under writes: {outcome:?}");
    };
    assert_ne!(successor, old);
    // The survivors' writers kept committing through the handover (at most the writes in
    // flight when the old leader stopped, one per writer, may fail).
    for (i, (ok, failed)) in results.iter().enumerate() {
        if i != index {
            assert!(
                *ok > 0 && *failed <= 2,
                "replica {i}: ok {ok}, failed {failed}"
            );
        }
    }
    survivors_follow(gateways, successor).await;
}

/// Distinct keys per writer task.
fn rand_key(n: u64) -> u64 {
    n ^ (rand::random::<u32>() as u64) << 16
}
