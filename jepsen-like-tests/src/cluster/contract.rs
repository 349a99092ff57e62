//! The contract between the runner/nemesis and a cluster: the [`Cluster`] trait and the
//! [`Endpoint`]s clients reach. Implementations live next to it; the module root only
//! re-exports, so implementations depend on this file rather than on the root.

use serde::{Deserialize, Serialize};
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use super::error::ClusterError;
use crate::NodeId;
use crate::nemesis::PartitionPlan;
use crate::nemesis::proxy::LinkFault;
use crate::state::NodeState;

/// Where clients reach a replica.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub node: NodeId,
    pub client_addr: SocketAddr,
}

impl Endpoint {
    pub fn base_url(&self) -> String {
        format!("http://{}", self.client_addr)
    }
}

/// Everything the runner and the nemesis do to a cluster. Methods take `&self`: the
/// nemesis and the final reads run concurrently with the clients.
pub trait Cluster: Send + Sync {
    fn nodes(&self) -> Vec<NodeId>;

    /// Client addresses of every replica.
    fn endpoints(&self) -> Vec<Endpoint>;

    /// Starts every node and returns once all are ready.
    fn start(&self) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Stops every node and removes what `start` set up (namespaces, proxies).
    fn stop(&self) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// (Re)starts one node from its data directory.
    fn start_node(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// kill -9.
    fn kill(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// SIGSTOP.
    fn pause(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// SIGCONT.
    fn resume(&self, node: NodeId) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Replaces the current partition by `plan`.
    fn partition(
        &self,
        plan: &PartitionPlan,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Removes every partition.
    fn heal_network(&self) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// Faults on the links into `to` (a cleared `LinkFault` removes them).
    fn set_link_fault(
        &self,
        to: NodeId,
        fault: LinkFault,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        let _ = (to, fault);
        async {
            Err(ClusterError::unsupported(
                "link faults",
                "this cluster runs no fault proxies",
            ))
        }
    }

    /// Skews `node`'s injectable clock by `offset_ms` (0 resets).
    fn skew_clock(
        &self,
        node: NodeId,
        offset_ms: i64,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send {
        let _ = (node, offset_ms);
        async {
            Err(ClusterError::unsupported(
                "clock skew",
                "this cluster has no clock-skew hook",
            ))
        }
    }

    /// The current Raft leader, if one can be found.
    fn leader(&self) -> impl Future<Output = Result<Option<NodeId>, ClusterError>> + Send;

    /// Restarts dead nodes, resumes paused ones, heals the network, clears link faults and
    /// resets clocks: whatever the nemesis did is undone.
    fn recover_all(&self) -> impl Future<Output = Result<(), ClusterError>> + Send;

    /// The node's replicated state, read after the run.
    fn read_final_state(
        &self,
        node: NodeId,
    ) -> impl Future<Output = Result<NodeState, ClusterError>> + Send;

    /// Where the node's output goes, for the report.
    fn node_log(&self, _node: NodeId) -> Option<PathBuf> {
        None
    }
}
