//! The per-node admin calls the suite needs from a replica (role, final state, clock skew).
//! They are HTTP calls to the gateway's admin API, which is the part to wire once the
//! cluster flags and endpoints exist; [`UnwiredNodeApi`] says so clearly meanwhile.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::ClusterError;
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
    pub log_path: PathBuf,
}

pub trait NodeApi: Send + Sync {
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

const UNWIRED: &str = "the gateway admin API (cluster status, /admin/quota, overrides, \
                       affinity, debug clock skew) is not wired into the chaos suite yet";

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
