#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Mutual TLS between replicas with a cluster CA, on real processes: three replicas holding
//! certificates of the cluster CA form a group; a replica with a certificate of another CA,
//! or with none, can neither join nor have an RPC served, and a client without a cluster
//! certificate gets no answer on the Raft port even with the right cluster secret.

mod common;
mod tls_support;

use common::*;
use http::Method;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tls_support::*;

const SECRET: &str = "test-cluster-secret";

/// A replica's config file: the cluster secret and, when `tls` names a CA dir and a
/// certificate name, mutual TLS with that CA and certificate.
fn replica_config(dir: &Path, file: &str, tls: Option<(&Path, &str)>) -> PathBuf {
    let mut text = format!("[cluster]\nsecret = \"{SECRET}\"\n");
    if let Some((ca_dir, name)) = tls {
        text += &format!(
            "tls_ca_path = \"{}\"\ntls_cert_path = \"{}\"\ntls_key_path = \"{}\"\n",
            path(ca_dir, "ca.pem"),
            path(ca_dir, &format!("{name}.pem")),
            path(ca_dir, &format!("{name}-key.pem")),
        );
    }
    let file = dir.join(file);
    std::fs::write(&file, text).unwrap();
    file
}

async fn spawn_replica(
    config: &Path,
    id: u64,
    raft: &str,
    data: &Path,
    join: Option<&str>,
) -> GatewayProcess {
    let id = id.to_string();
    let mut args = vec![
        "--config",
        config.to_str().unwrap(),
        "--node-id",
        &id,
        "--raft-addr",
        raft,
        "--data-dir",
        data.to_str().unwrap(),
    ];
    if let Some(join) = join {
        args.extend(["--join", join]);
    }
    GatewayProcess::spawn(&args).await
}

async fn cluster_status(base: &str) -> serde_json::Value {
    admin_call(
        base,
        ADMIN_KEY,
        Method::GET,
        "/admin/cluster",
        serde_json::Value::Null,
    )
    .await
    .json()
}

async fn tls_refusals(base: &str) -> u64 {
    metrics_text(base)
        .await
        .lines()
        .find_map(|l| l.strip_prefix("switchyard_ledger_peer_tls_refusals_total "))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

fn raw_rpc() -> Vec<u8> {
    // Not bincode: a route that is reached answers 400; what matters is whether any HTTP
    // answer comes back at all.
    let body = b"not a ledger query";
    let mut request = format!(
        "POST /ledger/read HTTP/1.1\r\nhost: localhost\r\nx-switchyard-cluster-secret: {SECRET}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(body);
    request
}

#[tokio::test]
async fn replicas_with_cluster_ca_certificates_form_a_group_and_others_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("cluster-ca");
    let rogue = dir.path().join("rogue-ca");
    make_local_ca(&ca, &["node1", "node2", "node3"]);
    make_local_ca(&rogue, &["node4"]);

    let raft1 = format!("127.0.0.1:{}", free_port());
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let name = format!("node{id}");
        let config = replica_config(dir.path(), &format!("{name}.toml"), Some((&ca, &name)));
        let raft = if id == 1 {
            raft1.clone()
        } else {
            "127.0.0.1:0".into()
        };
        let join = (id > 1).then_some(raft1.as_str());
        nodes.push(spawn_replica(&config, id, &raft, &dir.path().join(&name), join).await);
    }
    let first = nodes[0].base_url.clone();
    let formed = eventually(Duration::from_secs(60), || async {
        cluster_status(&first).await["voters"]
            .as_array()
            .is_some_and(|v| v.len() == 3)
    })
    .await;
    assert!(
        formed,
        "three replicas with cluster certificates form a group"
    );

    // The Raft port, spoken to directly with the right cluster secret.
    let raft_addr: SocketAddr = raft1.parse().unwrap();
    let member = connector(
        &ca.join("ca.pem"),
        Some((&ca.join("node2.pem"), &ca.join("node2-key.pem"))),
    );
    let answer = tls_exchange(&member, raft_addr, &raw_rpc()).await;
    assert!(
        answer.starts_with("HTTP/1.1 400"),
        "a cluster certificate is served: {answer}"
    );
    let before = tls_refusals(&first).await;
    let no_certificate = connector(&ca.join("ca.pem"), None);
    let answer = tls_exchange(&no_certificate, raft_addr, &raw_rpc()).await;
    assert!(
        !answer.contains("HTTP/1.1"),
        "no client certificate, no answer: {answer}"
    );
    let other_ca = connector(
        &ca.join("ca.pem"),
        Some((&rogue.join("node4.pem"), &rogue.join("node4-key.pem"))),
    );
    let answer = tls_exchange(&other_ca, raft_addr, &raw_rpc()).await;
    assert!(
        !answer.contains("HTTP/1.1"),
        "another CA's certificate, no answer: {answer}"
    );
    let mut plain = tokio::net::TcpStream::connect(raft_addr).await.unwrap();
    let answer = exchange(&mut plain, &raw_rpc()).await;
    assert!(
        !answer.contains("HTTP/1.1"),
        "plain HTTP, no answer: {answer}"
    );
    let counted = eventually(Duration::from_secs(10), || async {
        tls_refusals(&first).await >= before + 3
    })
    .await;
    assert!(counted, "each refused handshake is counted");

    // A fourth replica with another CA's certificate, and a fifth without TLS, try to join.
    let before = tls_refusals(&first).await;
    let rogue_config = replica_config(dir.path(), "node4.toml", Some((&rogue, "node4")));
    let node4 = spawn_replica(
        &rogue_config,
        4,
        "127.0.0.1:0",
        &dir.path().join("node4"),
        Some(&raft1),
    )
    .await;
    let plain_config = replica_config(dir.path(), "node5.toml", None);
    let node5 = spawn_replica(
        &plain_config,
        5,
        "127.0.0.1:0",
        &dir.path().join("node5"),
        Some(&raft1),
    )
    .await;
    let tried = eventually(Duration::from_secs(30), || async {
        tls_refusals(&first).await >= before + 4
    })
    .await;
    assert!(
        tried,
        "the outsiders' join attempts reached the Raft port and were refused"
    );
    let status = cluster_status(&first).await;
    let members = status["members"].as_object().unwrap();
    assert_eq!(members.len(), 3, "no outsider joined: {status}");
    assert!(
        !members.contains_key("4") && !members.contains_key("5"),
        "{status}"
    );
    // The outsiders never joined: they have no leader and no group.
    for outsider in [&node4, &node5] {
        let status = cluster_status(&outsider.base_url).await;
        assert!(status["leader"].is_null(), "{status}");
    }
}
