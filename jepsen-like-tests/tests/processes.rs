//! Node processes: a single managed process (pause, resume, kill -9, restart), and a
//! loopback `LocalProcessCluster` of stand-in nodes driven through the `Cluster` trait.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jepsen_like_tests::cluster::{
    Cluster, LocalClusterConfig, LocalProcessCluster, NetworkMode, NodeTemplate, UnwiredNodeApi,
};
use jepsen_like_tests::nemesis::PartitionPlan;
use jepsen_like_tests::nemesis::process::{
    ManagedProcess, ProcessError, ProcessSpec, process_state,
};
use jepsen_like_tests::nemesis::proxy::LinkFault;
use jepsen_like_tests::runner::stand_in::{ProbeResult, probe_echo};
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

/// Polls a condition the kernel applies asynchronously, for at most two seconds.
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

#[test]
fn a_managed_process_pauses_resumes_dies_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("node.log");
    let mut process = ManagedProcess::new(ProcessSpec {
        program: "sleep".into(),
        args: vec!["30".into()],
        env: Vec::new(),
        wrapper: Vec::new(),
        log_path: log_path.clone(),
    });
    let pid = process.start().unwrap();
    assert!(matches!(process.start(), Err(ProcessError::AlreadyRunning(p)) if p == pid));
    process.pause().unwrap();
    assert!(
        eventually(|| process_state(pid) == Some('T')),
        "SIGSTOP stops it"
    );
    process.resume().unwrap();
    assert!(
        eventually(|| process_state(pid) != Some('T')),
        "SIGCONT resumes it"
    );
    process.pause().unwrap();
    let status = process.kill9().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "kill -9 works on a stopped process too"
    );
    assert!(!process.is_running());
    assert!(matches!(process.pause(), Err(ProcessError::NotRunning)));

    let pid = process.start().unwrap();
    assert_eq!(process.starts(), 2);
    let status = process.terminate(Duration::from_secs(2)).unwrap();
    assert_eq!(status.signal(), Some(15));
    assert!(process_state(pid).is_none());
    let log = std::fs::read_to_string(log_path).unwrap();
    assert!(
        log.contains("--- start #1 ---") && log.contains("--- start #2 ---"),
        "{log}"
    );
}

async fn probe(addr: std::net::SocketAddr) -> ProbeResult {
    probe_echo(addr, Duration::from_millis(400)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_cluster_of_stand_ins_takes_every_fault() {
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
            program: env!("CARGO_BIN_EXE_jepsen-like-tests").into(),
            args: args.iter().map(|s| (*s).to_owned()).collect(),
            ..NodeTemplate::default()
        },
        work_dir: dir.path().to_path_buf(),
        network: NetworkMode::Loopback,
        ready_timeout_ms: 10_000,
        stop_grace_ms: 2_000,
        ..LocalClusterConfig::default()
    };
    let cluster = LocalProcessCluster::new(config, UnwiredNodeApi).unwrap();
    cluster.start().await.unwrap();
    let infos = cluster.infos().to_vec();
    for info in &infos {
        assert_eq!(probe(info.client_addr).await, ProbeResult::Echoed);
        assert_ne!(
            info.advertised_raft_addr, info.raft_addr,
            "peers go through the proxy"
        );
        assert_eq!(probe(info.advertised_raft_addr).await, ProbeResult::Echoed);
    }

    cluster
        .set_link_fault(2, LinkFault::blackhole())
        .await
        .unwrap();
    assert_eq!(
        probe(infos[1].advertised_raft_addr).await,
        ProbeResult::TimedOut
    );
    assert_eq!(
        probe(infos[1].client_addr).await,
        ProbeResult::Echoed,
        "clients are not behind it"
    );
    cluster
        .set_link_fault(2, LinkFault::default())
        .await
        .unwrap();
    assert_eq!(
        probe(infos[1].advertised_raft_addr).await,
        ProbeResult::Echoed
    );

    cluster.kill(2).await.unwrap();
    assert!(
        matches!(probe(infos[1].client_addr).await, ProbeResult::Failed(_)),
        "refused"
    );
    cluster.pause(3).await.unwrap();
    assert_eq!(
        probe(infos[2].client_addr).await,
        ProbeResult::TimedOut,
        "a paused node is silent"
    );
    let partition = cluster
        .partition(&PartitionPlan::isolate(1, &[1, 2, 3]))
        .await;
    assert!(
        partition.unwrap_err().is_unsupported(),
        "loopback cannot partition"
    );
    assert!(
        cluster.leader().await.unwrap_err().is_unsupported(),
        "the admin API is not wired"
    );

    cluster.recover_all().await.unwrap();
    for info in &infos {
        let back = (0..50).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            std::net::TcpStream::connect(info.client_addr).is_ok()
        });
        assert!(back, "node {} is back", info.id);
        assert_eq!(probe(info.client_addr).await, ProbeResult::Echoed);
    }
    let log = std::fs::read_to_string(cluster.node_log(2).unwrap()).unwrap();
    assert!(
        log.contains("--- start #2 ---"),
        "node 2 was restarted: {log}"
    );
    assert!(infos[0].data_dir.is_dir());

    cluster.stop().await.unwrap();
    for info in &infos {
        assert!(matches!(
            probe(info.client_addr).await,
            ProbeResult::Failed(_)
        ));
    }
}
