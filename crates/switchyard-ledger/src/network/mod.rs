//! Raft RPCs and ledger forwarding over HTTP: an axum server on the node's raft address
//! ([`server`]), a pooled hyper client ([`transport`]) used by openraft's network factory
//! ([`raft_client`]), and a fault switch tests use to cut nodes off ([`fault`]).

pub mod fault;
pub mod raft_client;
pub mod server;
pub mod transport;

pub use fault::FaultSwitch;
pub use raft_client::NetworkFactory;
pub use transport::{HttpTransport, TransportError};

/// Header carrying the shared cluster secret on every ledger RPC.
pub const SECRET_HEADER: &str = "x-switchyard-cluster-secret";
/// Header naming the sending node, so the fault switch can drop traffic from it.
pub const FROM_HEADER: &str = "x-switchyard-node";
