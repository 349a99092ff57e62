//! openraft's network factory: one connection handle per peer, each RPC a POST of a bincode
//! body to `/raft/...` on the peer's raft address.

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;

use super::transport::{HttpTransport, TransportError};
use crate::codec::{decode, encode};
use crate::command::NodeId;
use crate::raft_types::{RaftNode, TypeConfig};

#[derive(Clone)]
pub struct NetworkFactory {
    transport: Arc<HttpTransport>,
}

impl NetworkFactory {
    pub fn new(transport: Arc<HttpTransport>) -> Self {
        Self { transport }
    }
}

pub struct PeerConnection {
    target: NodeId,
    addr: String,
    transport: Arc<HttpTransport>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = PeerConnection;

    async fn new_client(&mut self, target: NodeId, node: &RaftNode) -> Self::Network {
        PeerConnection {
            target,
            addr: node.addr.clone(),
            transport: self.transport.clone(),
        }
    }
}

impl PeerConnection {
    async fn call<Req, Resp, E>(
        &self,
        path: &str,
        request: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, RaftNode, E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body = encode(request).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let bytes = self
            .transport
            .post(Some(self.target), &self.addr, path, body, option.hard_ttl())
            .await
            .map_err(|e| match e {
                TransportError::Request(_) => RPCError::Network(NetworkError::new(&e)),
                _ => RPCError::Unreachable(Unreachable::new(&e)),
            })?;
        let answer: Result<Resp, E> =
            decode(&bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        answer.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

impl RaftNetwork<TypeConfig> for PeerConnection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, RaftNode, RaftError<NodeId>>> {
        self.call("/raft/append", &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, RaftNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call("/raft/snapshot", &rpc, &option).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, RaftNode, RaftError<NodeId>>> {
        self.call("/raft/vote", &rpc, &option).await
    }
}
