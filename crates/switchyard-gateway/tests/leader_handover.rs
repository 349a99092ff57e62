#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A Raft leader that drains hands leadership over before it stops: three replicas in one
//! process with a static member list, the leader runs the shutdown phases, and a successor
//! is elected while it still votes.

mod common;

use common::*;
use std::time::Duration;
use switchyard_gateway::cluster::ClusterMember;
use switchyard_gateway::lifecycle::{DrainPlan, Handover};

fn free_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_draining_leader_hands_leadership_to_a_follower() {
    let sims = start_sims(1).await;
    let dir = tempfile::tempdir().unwrap();
    let addrs: Vec<String> = (0..3).map(|_| free_addr()).collect();
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
        let mut config = config_for(&sims, "round_robin");
        config.cluster.node_id = i as u64 + 1;
        config.cluster.raft_addr = addr.clone();
        config.cluster.secret = "handover-test-secret".into();
        config.cluster.members = members.clone();
        config.cluster.data_dir = dir.path().join(format!("n{i}")).display().to_string();
        gateways.push(switchyard_gateway::start(config, None).await.unwrap());
    }
    let leader_of = |gateway: &switchyard_gateway::GatewayHandle| {
        gateway.state().cluster.as_ref().unwrap().status().leader
    };
    let formed = eventually(Duration::from_secs(30), || async {
        let leaders: Vec<_> = gateways.iter().map(leader_of).collect();
        leaders[0].is_some() && leaders.iter().all(|l| *l == leaders[0])
    })
    .await;
    assert!(formed, "the group never agreed on a leader");
    let old = leader_of(&gateways[0]).unwrap();
    let index = gateways
        .iter()
        .position(|g| g.state().cluster.as_ref().unwrap().id() == old)
        .unwrap();
    let leader = gateways.remove(index);

    let plan = DrainPlan {
        accept: Duration::ZERO,
        drain: Duration::from_secs(1),
        handover: Duration::from_secs(10),
    };
    let outcome = leader.drain_and_stop(plan).await;
    let Handover::HandedOver(successor) = outcome else {
        panic!("leadership was not handed over: {outcome:?}");
    };
    assert_ne!(successor, old);
    let agreed = eventually(Duration::from_secs(10), || async {
        gateways.iter().all(|g| leader_of(g) == Some(successor))
    })
    .await;
    assert!(agreed, "the survivors do not follow node {successor}");
    for gateway in gateways {
        gateway.shutdown().await;
    }
}
