//! The TLS configurations replicas use to talk to each other.

use std::sync::Arc;

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
