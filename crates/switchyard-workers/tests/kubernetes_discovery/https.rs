//! The fake API server over HTTPS, with a throwaway CA made by the deploy script.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::fake_api::FakeApi;

impl FakeApi {
    /// The same API over HTTPS with the certificate and key in `dir` (`server.pem`,
    /// `server-key.pem`); counts the handshakes that failed.
    pub async fn serve_tls(self, dir: &std::path::Path) -> (String, Arc<AtomicU64>) {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", tcp.local_addr().unwrap());
        let failed = Arc::new(AtomicU64::new(0));
        let listener = TlsListener {
            tcp,
            acceptor: tls_acceptor(dir),
            failed: failed.clone(),
        };
        let app = self.app();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (url, failed)
    }
}

fn tls_acceptor(dir: &std::path::Path) -> tokio_rustls::TlsAcceptor {
    use rustls_pki_types::pem::PemObject;
    let certs = rustls_pki_types::CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(dir.join("server-key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Accepts TCP connections and completes their TLS handshake before axum sees them.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    failed: Arc<AtomicU64>,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                continue;
            };
            match self.acceptor.accept(stream).await {
                Ok(tls) => return (tls, addr),
                Err(_) => {
                    self.failed.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// A throwaway CA and a certificate for 127.0.0.1 signed by it.
pub fn make_local_ca(dir: &std::path::Path) {
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/tls/make-local-ca.sh");
    let status = std::process::Command::new("bash")
        .arg(script)
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run make-local-ca.sh (needs openssl)");
    assert!(status.success());
}
