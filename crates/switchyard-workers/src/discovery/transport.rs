//! How discovery reaches the API server: plain HTTP through the shared pooled client (a
//! `kubectl proxy` sidecar), or HTTPS straight to the API server, its certificate verified
//! against the cluster CA (in a pod: the service account's `ca.crt`).
//!
//! An HTTPS call opens its own connection: discovery makes one list per resync and one
//! long-lived watch at a time, so pooling would save nothing worth a second client type.

use bytes::Bytes;
use http::{Request, Response, Uri, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use super::config::DiscoveryConfig;
use crate::http_client::HttpClient;

/// TCP connect plus TLS handshake.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("discovery.ca_file `{path}`: {message}")]
    CaFile { path: String, message: String },
    #[error("discovery TLS: {0}")]
    Tls(String),
}

pub enum Transport {
    Plain(HttpClient),
    Https(TlsConnector),
}

impl Transport {
    /// The transport `config.api_server`'s scheme asks for; HTTPS loads the CA bundle now (a
    /// missing or empty bundle is a start-up error naming the field).
    pub fn new(client: HttpClient, config: &DiscoveryConfig) -> Result<Self, TransportError> {
        if !config.api_server.starts_with("https://") {
            return Ok(Transport::Plain(client));
        }
        let path = config.effective_ca_file();
        let ca_error = |message: String| TransportError::CaFile {
            path: path.clone(),
            message,
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_file_iter(&path).map_err(|e| ca_error(e.to_string()))? {
            let cert = cert.map_err(|e| ca_error(e.to_string()))?;
            roots.add(cert).map_err(|e| ca_error(e.to_string()))?;
        }
        if roots.is_empty() {
            return Err(ca_error("no certificate in the file".into()));
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| TransportError::Tls(e.to_string()))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Transport::Https(TlsConnector::from(Arc::new(tls))))
    }

    /// Sends one request to the absolute URI it carries.
    pub async fn send(&self, request: Request<Full<Bytes>>) -> Result<Response<Incoming>, String> {
        match self {
            Transport::Plain(client) => client.request(request).await.map_err(|e| e.to_string()),
            Transport::Https(connector) => send_tls(connector, request).await,
        }
    }
}

async fn send_tls(
    connector: &TlsConnector,
    request: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, String> {
    let (mut parts, body) = request.into_parts();
    let host = parts
        .uri
        .host()
        .ok_or_else(|| format!("no host in {}", parts.uri))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = parts.uri.port_u16().unwrap_or(443);
    let authority = parts
        .uri
        .authority()
        .map(|a| a.as_str().to_string())
        .unwrap_or_else(|| host.clone());
    let server_name =
        ServerName::try_from(host.clone()).map_err(|e| format!("API server name `{host}`: {e}"))?;
    let connect = async {
        let tcp = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| format!("connect {host}:{port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        connector
            .connect(server_name, tcp)
            .await
            .map_err(|e| format!("TLS with {host}:{port}: {e}"))
    };
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| format!("connect {host}:{port}: timed out after {CONNECT_TIMEOUT:?}"))??;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP/1.1 handshake with {host}:{port}: {e}"))?;
    // Drives the connection until the response body is read or dropped.
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "kubernetes API connection ended");
        }
    });
    // On its own connection the request line carries the path; the authority goes in `Host`.
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    parts.uri = path
        .parse::<Uri>()
        .map_err(|e| format!("bad path {path}: {e}"))?;
    let host_value = http::HeaderValue::from_str(&authority)
        .map_err(|e| format!("bad authority {authority}: {e}"))?;
    parts.headers.insert(header::HOST, host_value);
    sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(|e| e.to_string())
}
