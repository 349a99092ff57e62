#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! TLS fixtures: a local CA made by `deploy/tls/make-local-ca.sh` (the script operators use),
//! rustls clients with or without a client certificate, a raw request/answer exchange, and a
//! TLS-terminating front for a plain worker (an https worker).

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Makes `dir/ca.pem`, `dir/server{,-key}.pem` and one replica certificate per name.
pub fn make_local_ca(dir: &Path, replicas: &[&str]) {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/tls/make-local-ca.sh");
    let status = std::process::Command::new("bash")
        .arg(script)
        .arg(dir)
        .args(replicas)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run make-local-ca.sh (needs openssl)");
    assert!(status.success());
}

pub fn path(dir: &Path, file: &str) -> String {
    dir.join(file).display().to_string()
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub fn roots(ca: &Path) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    roots
}

/// A client trusting `ca`, presenting `identity` (certificate, key) when given.
pub fn connector(ca: &Path, identity: Option<(&Path, &Path)>) -> tokio_rustls::TlsConnector {
    let builder = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots(ca));
    let config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(cert)
                    .unwrap()
                    .map(|c| c.unwrap())
                    .collect(),
                PrivateKeyDer::from_pem_file(key).unwrap(),
            )
            .unwrap(),
    };
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

pub fn localhost() -> ServerName<'static> {
    ServerName::try_from("localhost").unwrap()
}

/// Writes `request` and reads until the peer closes (or 10 s): the raw answer, possibly empty.
pub async fn exchange<S: AsyncRead + AsyncWrite + Unpin>(stream: &mut S, request: &[u8]) -> String {
    if stream.write_all(request).await.is_err() {
        return String::new();
    }
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

/// Connects over TLS and sends `request`; the answer, or empty when the handshake or the
/// exchange failed (a refused client certificate shows up on the first read in TLS 1.3).
pub async fn tls_exchange(
    tls: &tokio_rustls::TlsConnector,
    addr: SocketAddr,
    request: &[u8],
) -> String {
    let tcp = TcpStream::connect(addr).await.unwrap();
    match tls.connect(localhost(), tcp).await {
        Ok(mut stream) => exchange(&mut stream, request).await,
        Err(_) => String::new(),
    }
}

/// A TLS front (certificate `cert`/`key`) forwarding every connection to `backend` in plain
/// text: a plain simulated worker served as an `https://` worker.
pub struct TlsFront {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsFront {
    pub async fn start(cert: &Path, key: &Path, backend: SocketAddr) -> Self {
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
            .unwrap()
            .map(|c| c.unwrap())
            .collect();
        let key = PrivateKeyDer::from_pem_file(key).unwrap();
        let config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Self { addr, task }
    }
}
