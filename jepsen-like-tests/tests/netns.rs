//! Network namespaces and iptables partitions, for real. Needs root (CAP_NET_ADMIN), iproute2
//! and iptables; without them each test prints why it is skipped and passes. Every test uses
//! its own prefix and subnet (tests run in parallel) and tears down even when it fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jepsen_like_tests::NodeId;
use jepsen_like_tests::cluster::{
    Cluster, LocalClusterConfig, LocalProcessCluster, NetworkMode, NodeTemplate, UnwiredNodeApi,
};
use jepsen_like_tests::nemesis::PartitionPlan;
use jepsen_like_tests::nemesis::command::SystemRunner;
use jepsen_like_tests::nemesis::netns::{NetnsLab, probe};
use jepsen_like_tests::nemesis::partition::IptablesPartitioner;
use jepsen_like_tests::nemesis::process::{ManagedProcess, ProcessSpec};
use jepsen_like_tests::runner::stand_in::{ProbeResult, probe_echo};
use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_jepsen-like-tests");

/// `Some(true)`: namespaces and iptables; `Some(false)`: namespaces only; `None`: skip.
fn support(prefix: &str) -> Option<bool> {
    let support = probe(&SystemRunner, prefix);
    match (&support.namespaces, &support.iptables) {
        (Err(reason), _) => {
            eprintln!("SKIP: network namespaces unavailable: {reason}");
            None
        }
        (Ok(()), Err(reason)) => {
            eprintln!("SKIP partition checks: {reason}");
            Some(false)
        }
        (Ok(()), Ok(())) => Some(true),
    }
}

/// Echo round trip from inside `namespace` (the `probe-tcp` subcommand's exit code).
fn probe_from(namespace: &str, to: SocketAddr) -> i32 {
    let output = Command::new("ip")
        .args([
            "netns",
            "exec",
            namespace,
            BIN,
            "probe-tcp",
            "--to",
            &to.to_string(),
            "--timeout-ms",
            "400",
        ])
        .output()
        .unwrap();
    output.status.code().unwrap_or(-1)
}

async fn wait_echo(addr: SocketAddr) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if probe_echo(addr, Duration::from_millis(200)).await == ProbeResult::Echoed {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{addr} never answered");
}

fn namespaces() -> String {
    String::from_utf8_lossy(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn iptables_partitions_drop_silently_between_namespaces_and_heal() {
    let Some(iptables) = support("sjta") else {
        return;
    };
    let nodes: Vec<NodeId> = vec![1, 2, 3];
    let lab = NetnsLab::new(SystemRunner, "sjta", 201, nodes.clone()).unwrap();
    {
        let _guard = lab.guard();
        lab.setup().unwrap();
        lab.setup().unwrap(); // idempotent: a second setup starts from a clean slate
        let dir = tempfile::tempdir().unwrap();
        let mut processes: Vec<ManagedProcess> = Vec::new();
        for &node in &nodes {
            let addr = SocketAddr::new(lab.node_ip(node).into(), 7000);
            let mut process = ManagedProcess::new(ProcessSpec {
                program: BIN.into(),
                args: vec!["stand-in".into(), "--listen".into(), addr.to_string()],
                env: Vec::new(),
                wrapper: lab.exec_prefix(node),
                log_path: dir.path().join(format!("n{node}.log")),
            });
            process.start().unwrap();
            processes.push(process);
            wait_echo(addr).await; // reachable from the root namespace, over the bridge
        }
        let addr = |node: NodeId| SocketAddr::new(lab.node_ip(node).into(), 7000);
        assert_eq!(
            probe_from(&lab.namespace(1), addr(2)),
            0,
            "namespaces reach each other"
        );
        if iptables {
            let partitioner = IptablesPartitioner::new(&lab);
            partitioner
                .apply(&PartitionPlan::isolate(1, &nodes))
                .unwrap();
            assert_eq!(
                probe_from(&lab.namespace(1), addr(2)),
                3,
                "silent drop: a timeout, not a refusal"
            );
            assert_eq!(
                probe_from(&lab.namespace(3), addr(1)),
                3,
                "both directions are cut"
            );
            assert_eq!(
                probe_from(&lab.namespace(2), addr(3)),
                0,
                "the majority still talks"
            );
            assert_eq!(
                probe_echo(addr(1), Duration::from_millis(400)).await,
                ProbeResult::Echoed,
                "clients reach it"
            );
            partitioner.heal().unwrap();
            assert_eq!(probe_from(&lab.namespace(1), addr(2)), 0, "healed");
        }
        for mut process in processes {
            process.kill9().unwrap();
        }
    }
    assert!(
        !namespaces().contains("sjta-n"),
        "teardown removed every namespace"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespaced_cluster_partitions_through_its_proxies() {
    let Some(iptables) = support("sjtb") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "stand-in",
        "--listen",
        "{client_addr}",
        "--listen",
        "{raft_addr}",
    ];
    let config = LocalClusterConfig {
        nodes: 3,
        template: NodeTemplate {
            program: BIN.into(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            ..NodeTemplate::default()
        },
        work_dir: dir.path().to_path_buf(),
        network: NetworkMode::Netns {
            prefix: "sjtb".into(),
            subnet: 202,
        },
        proxy_port_base: 17_300,
        ready_timeout_ms: 10_000,
        stop_grace_ms: 2_000,
        ..LocalClusterConfig::default()
    };
    let cluster = LocalProcessCluster::new(config, UnwiredNodeApi).unwrap();
    cluster.start().await.unwrap();
    let infos = cluster.infos().to_vec();
    let ns1 = cluster.lab().unwrap().namespace(1);
    assert_eq!(
        probe_from(&ns1, infos[1].advertised_raft_addr),
        0,
        "node 1 reaches node 2's proxy"
    );
    if iptables {
        cluster
            .partition(&PartitionPlan::isolate(1, &[1, 2, 3]))
            .await
            .unwrap();
        assert_eq!(
            probe_from(&ns1, infos[1].advertised_raft_addr),
            3,
            "the proxied link is cut"
        );
        assert_eq!(
            probe_from(&ns1, infos[1].raft_addr),
            3,
            "the direct link is cut"
        );
        cluster.heal_network().await.unwrap();
        assert_eq!(probe_from(&ns1, infos[1].advertised_raft_addr), 0);
    }
    cluster.kill(3).await.unwrap();
    cluster.recover_all().await.unwrap();
    wait_echo(infos[2].client_addr).await;
    cluster.stop().await.unwrap();
    assert!(
        !namespaces().contains("sjtb-n"),
        "stop removed the namespaces"
    );
}
