//! Raft RPCs and ledger forwarding over HTTP: an axum server on the node's raft address
//! ([`server`]), a pooled hyper client ([`transport`]) used by openraft's network factory
//! ([`raft_client`]), and a fault switch tests use to cut nodes off ([`fault`]). With
//! [`PeerTls`] both ends speak mutual TLS ([`tls_listener`] on the server side).

pub mod fault;
mod peer_tls;
pub mod raft_client;
pub mod server;
pub mod tls_listener;
pub mod transport;
mod wire;

pub use fault::FaultSwitch;
pub use peer_tls::PeerTls;
pub use raft_client::NetworkFactory;
pub use transport::{HttpTransport, TransportError};
pub use wire::{MAX_RPC_BODY_BYTES, SNAPSHOT_CHUNK_BYTES};
