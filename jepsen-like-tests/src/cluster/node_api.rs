//! The per-node calls the suite needs from a replica (files it needs before starting, role,
//! final state, clock skew). `crate::switchyard::SwitchyardNodeApi` makes them against the
//! real gateway; [`UnwiredNodeApi`] serves stand-in nodes (readiness by TCP only).

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::error::ClusterError;
use super::template::TemplateVars;
use super::workers::WorkerInfo;
use crate::NodeId;
use crate::state::NodeState;

/// Everything known about one node of a local cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    pub id: NodeId,
    pub client_addr: SocketAddr,
    /// Where the node's Raft server listens.
    pub raft_addr: SocketAddr,
    /// What the node tells its peers (its fault proxy, when proxies are on).
    pub advertised_raft_addr: SocketAddr,
    pub data_dir: PathBuf,
    /// The node's own folder (holds `data_dir` and the files from `NodeApi::node_files`).
    pub dir: PathBuf,
    pub log_path: PathBuf,
}

impl TemplateVars {
    /// What `node`'s templates expand to, within the cluster `all`.
    pub fn for_node(node: &NodeInfo, all: &[NodeInfo], secret: &str) -> Self {
        let members = all
            .iter()
            .map(|i| format!("{}={}", i.id, i.advertised_raft_addr))
            .collect::<Vec<_>>()
            .join(",");
        Self {
            id: node.id,
            host: node.client_addr.ip().to_string(),
            client_addr: node.client_addr.to_string(),
            client_port: node.client_addr.port(),
            raft_addr: node.raft_addr.to_string(),
            raft_port: node.raft_addr.port(),
            advertised_raft_addr: node.advertised_raft_addr.to_string(),
            data_dir: node.data_dir.display().to_string(),
            node_dir: node.dir.display().to_string(),
            members,
            bootstrap_raft_addr: all
                .first()
                .map(|i| i.advertised_raft_addr.to_string())
                .unwrap_or_default(),
            secret: secret.to_owned(),
        }
    }
}

/// The whole cluster as planned, for generating one node's files.
#[derive(Clone, Copy, Debug)]
pub struct ClusterLayout<'a> {
    pub nodes: &'a [NodeInfo],
    pub workers: &'a [WorkerInfo],
    pub secret: &'a str,
}

pub trait NodeApi: Send + Sync {
    /// Files (name, content) written into the node's folder before each start, e.g. a
    /// per-node config. Default: none.
    fn node_files(
        &self,
        node: &NodeInfo,
        layout: &ClusterLayout<'_>,
    ) -> Result<Vec<(String, String)>, ClusterError> {
        let _ = (node, layout);
        Ok(Vec::new())
    }

    /// Whether the node serves clients yet. Default: its client port accepts connections.
    fn ready(&self, node: &NodeInfo) -> impl Future<Output = bool> + Send {
        let addr = node.client_addr;
        async move {
            matches!(
                tokio::time::timeout(
                    Duration::from_millis(500),
                    tokio::net::TcpStream::connect(addr)
                )
                .await,
                Ok(Ok(_))
            )
        }
    }

    fn is_leader(&self, node: &NodeInfo)
    -> impl Future<Output = Result<bool, ClusterError>> + Send;

    fn read_state(
        &self,
        node: &NodeInfo,
    ) -> impl Future<Output = Result<NodeState, ClusterError>> + Send;

    fn skew_clock(
        &self,
        node: &NodeInfo,
        offset_ms: i64,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
}

/// Placeholder until the gateway's admin API is wired: readiness by TCP, everything else
/// `Unsupported` with a pointer to what is missing.
#[derive(Clone, Copy, Debug, Default)]
pub struct UnwiredNodeApi;

const UNWIRED: &str = "stand-in nodes have no admin API (use switchyard::SwitchyardNodeApi \
                       for real Switchyard replicas)";

impl NodeApi for UnwiredNodeApi {
    async fn is_leader(&self, _node: &NodeInfo) -> Result<bool, ClusterError> {
        Err(ClusterError::unsupported("leader lookup", UNWIRED))
    }

    async fn read_state(&self, _node: &NodeInfo) -> Result<NodeState, ClusterError> {
        Err(ClusterError::unsupported("final state read", UNWIRED))
    }

    async fn skew_clock(&self, _node: &NodeInfo, _offset_ms: i64) -> Result<(), ClusterError> {
        Err(ClusterError::unsupported("clock skew", UNWIRED))
    }
}
