//! Raft RPCs and ledger forwarding over HTTP: an axum server on the node's raft address
//! ([`server`]), a pooled hyper client ([`transport`]) used by openraft's network factory
//! ([`raft_client`]), and a fault switch tests use to cut nodes off ([`fault`]). With
//! [`PeerTls`] both ends speak mutual TLS ([`tls_listener`] on the server side).

pub mod fault;
pub mod raft_client;
pub mod server;
pub mod tls_listener;
pub mod transport;

use std::sync::Arc;

pub use fault::FaultSwitch;
pub use raft_client::NetworkFactory;
pub use transport::{HttpTransport, TransportError};

/// Header carrying the shared cluster secret on every ledger RPC.
pub const SECRET_HEADER: &str = "x-switchyard-cluster-secret";
/// Header naming the sending node, so the fault switch can drop traffic from it.
pub const FROM_HEADER: &str = "x-switchyard-node";

/// Largest snapshot chunk openraft sends in one `/raft/snapshot` call. Smaller than
/// [`MAX_RPC_BODY_BYTES`] with room for the request's framing, so a state of any size reaches
/// a lagging follower or a new learner chunk by chunk.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1024 * 1024;

/// Largest request body the Raft/ledger server reads. An append of up to openraft's
/// `max_payload_entries` entries, or one snapshot chunk plus framing, must fit; axum's implicit
/// 2 MiB would refuse openraft's default 3 MiB chunks and strand a follower forever.
pub const MAX_RPC_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Mutual TLS between replicas. The server config must demand and verify a client
/// certificate (signed by the cluster CA), the client config must present this replica's
/// certificate and verify the peer's against the same CA: a host without a certificate of
/// the cluster can then neither send an RPC nor answer one. Both may reload their
/// certificates in place (resolvers and verifiers behind the configs).
#[derive(Clone, Debug)]
pub struct PeerTls {
    pub server: Arc<rustls::ServerConfig>,
    pub client: Arc<rustls::ClientConfig>,
}
