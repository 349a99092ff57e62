//! openraft's network factory: one connection handle per peer, each RPC a POST of a bincode
//! body to `/raft/...` on the peer's raft address.

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{RPCOption, RPCTypes, RaftNetwork, RaftNetworkFactory};
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
    /// A peer that answers too late is reported as a `Timeout`, not `Unreachable`: openraft
    /// sends the next heartbeat at once after a timeout, but pauses replication to an
    /// unreachable peer for its backoff (500 ms). A follower whose disk is slow for one
    /// append would otherwise hear nothing for 600 ms and more, and call an election.
    async fn call<Req, Resp, E>(
        &self,
        action: RPCTypes,
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
                TransportError::Timeout(timeout) => RPCError::Timeout(Timeout {
                    action,
                    id: self.transport.node_id(),
                    target: self.target,
                    timeout,
                }),
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
        self.call(RPCTypes::AppendEntries, "/raft/append", &rpc, &option)
            .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, RaftNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.call(RPCTypes::InstallSnapshot, "/raft/snapshot", &rpc, &option)
            .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, RaftNode, RaftError<NodeId>>> {
        self.call(RPCTypes::Vote, "/raft/vote", &rpc, &option).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::network::FaultSwitch;
    use openraft::Vote;
    use std::time::Duration;

    fn heartbeat() -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(1, 1),
            prev_log_id: None,
            leader_commit: None,
            entries: Vec::new(),
        }
    }

    async fn connection_to(addr: String) -> PeerConnection {
        let transport = Arc::new(HttpTransport::new(
            1,
            Arc::from("raft-client-test"),
            Arc::new(FaultSwitch::default()),
            Duration::from_secs(1),
            None,
        ));
        NetworkFactory::new(transport)
            .new_client(2, &RaftNode { addr })
            .await
    }

    #[tokio::test]
    async fn a_peer_that_answers_too_late_is_a_timeout_not_unreachable() {
        // Accepts the connection and reads, but never answers: a follower whose disk stalls.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let held = tokio::spawn(async move {
            let mut sockets = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                sockets.push(socket);
            }
        });
        let mut peer = connection_to(addr).await;
        let error = peer
            .append_entries(heartbeat(), RPCOption::new(Duration::from_millis(100)))
            .await
            .unwrap_err();
        match error {
            RPCError::Timeout(timeout) => {
                assert_eq!(timeout.action, RPCTypes::AppendEntries);
                assert_eq!((timeout.id, timeout.target), (1, 2));
                assert_eq!(timeout.timeout, Duration::from_millis(100));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        held.abort();
    }

    #[tokio::test]
    async fn a_peer_that_refuses_connections_is_unreachable() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let mut peer = connection_to(addr).await;
        let error = peer
            .append_entries(heartbeat(), RPCOption::new(Duration::from_millis(500)))
            .await
            .unwrap_err();
        assert!(
            matches!(error, RPCError::Unreachable(_)),
            "expected unreachable, got {error:?}"
        );
    }
}
