//! TLS with rustls (ring provider) everywhere the gateway talks over a network:
//! the client listener (`[listener]`), mutual TLS between replicas with a cluster CA
//! (`[cluster]`), and https workers verified against a configured CA (`[upstream]`).
//! Certificates, keys and CA bundles are PEM files re-read in place when they change
//! ([`reload`]): new handshakes use the new material, open connections keep theirs.

mod error;
mod material;
mod reload;

pub use error::TlsError;
pub(crate) use error::provider;
pub use material::{CaSource, CertSource};
pub use reload::{Reloadable, spawn_reloader};

use std::sync::Arc;
use switchyard_ledger::PeerTls;
use tokio_rustls::TlsAcceptor;

use crate::cluster::ClusterConfig;
use crate::config::{ListenerConfig, UpstreamConfig};

/// Every TLS configuration the gateway needs, built once at start-up, and the sources that
/// reload in place.
#[derive(Default)]
pub struct TlsSet {
    /// The client listener's acceptor (`None`: plain HTTP).
    pub listener: Option<TlsAcceptor>,
    /// Mutual TLS between replicas (`None`: plain HTTP on the Raft port).
    pub peers: Option<PeerTls>,
    /// How the gateway verifies https workers (`None`: only `http://` workers).
    pub upstream: Option<Arc<rustls::ClientConfig>>,
    /// What the reloader polls.
    pub sources: Vec<Arc<dyn Reloadable>>,
}

impl TlsSet {
    pub fn from_config(
        listener: &ListenerConfig,
        cluster: &ClusterConfig,
        upstream: &UpstreamConfig,
    ) -> Result<Self, TlsError> {
        let mut set = Self::default();
        if listener.tls_enabled() {
            let cert = Arc::new(CertSource::load(
                "listener.tls_cert_path",
                &listener.tls_cert_path,
                "listener.tls_key_path",
                &listener.tls_key_path,
            )?);
            let config = rustls::ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::config("listener", e))?
                .with_no_client_auth()
                .with_cert_resolver(cert.clone());
            set.listener = Some(TlsAcceptor::from(Arc::new(with_http1_alpn(config))));
            set.sources.push(cert);
        }
        if cluster.tls_enabled() {
            let cert = Arc::new(CertSource::load(
                "cluster.tls_cert_path",
                &cluster.tls_cert_path,
                "cluster.tls_key_path",
                &cluster.tls_key_path,
            )?);
            let ca = Arc::new(CaSource::load("cluster.tls_ca_path", &cluster.tls_ca_path)?);
            // Both ends demand a certificate signed by the cluster CA: a host without one can
            // neither call a replica nor pass for one.
            let server = rustls::ServerConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::config("cluster", e))?
                .with_client_cert_verifier(ca.clone())
                .with_cert_resolver(cert.clone());
            let client = rustls::ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::config("cluster", e))?
                .dangerous()
                .with_custom_certificate_verifier(ca.clone())
                .with_client_cert_resolver(cert.clone());
            let mut client = client;
            client.resumption = rustls::client::Resumption::disabled();
            let mut server = with_http1_alpn(server);
            // No session resumption: every connection presents a certificate checked against
            // the CA in force, so a rotated-out CA or key stops working at once.
            server.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
            server.send_tls13_tickets = 0;
            set.peers = Some(PeerTls {
                server: Arc::new(server),
                client: Arc::new(client),
            });
            set.sources.push(cert);
            set.sources.push(ca);
        }
        if !upstream.tls_ca_path.is_empty() {
            let ca = Arc::new(CaSource::load(
                "upstream.tls_ca_path",
                &upstream.tls_ca_path,
            )?);
            let client = rustls::ClientConfig::builder_with_provider(provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::config("upstream", e))?
                .dangerous()
                .with_custom_certificate_verifier(ca.clone())
                .with_no_client_auth();
            set.upstream = Some(Arc::new(client));
            set.sources.push(ca);
        }
        Ok(set)
    }
}

/// Starts the reloader for `set`'s sources (none without TLS, or with `interval` zero).
pub fn spawn_for(
    set: &TlsSet,
    interval: std::time::Duration,
    registry: &prometheus::Registry,
) -> Result<Option<tokio::task::JoinHandle<()>>, prometheus::Error> {
    if set.sources.is_empty() || interval.is_zero() {
        return Ok(None);
    }
    let outcomes = reload::reload_counter(registry)?;
    Ok(Some(spawn_reloader(
        set.sources.clone(),
        interval,
        outcomes,
    )))
}

fn with_http1_alpn(mut config: rustls::ServerConfig) -> rustls::ServerConfig {
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    config
}
