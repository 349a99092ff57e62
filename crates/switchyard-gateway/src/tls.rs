//! TLS for the client listener: a certificate chain and private key from PEM files
//! (`listener.tls_cert_path`, `listener.tls_key_path`), served with rustls (ring provider).

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("listener.tls_cert_path `{path}`: {message}")]
    Certificate { path: String, message: String },
    #[error("listener.tls_key_path `{path}`: {message}")]
    Key { path: String, message: String },
    #[error("listener TLS: {0}")]
    Config(String),
}

/// The acceptor for a certificate chain and key in PEM files.
pub fn acceptor(cert_path: &str, key_path: &str) -> Result<TlsAcceptor, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_path)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| TlsError::Certificate {
            path: cert_path.into(),
            message: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Certificate {
            path: cert_path.into(),
            message: "no certificate in the file".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(key_path).map_err(|e| TlsError::Key {
        path: key_path.into(),
        message: e.to_string(),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let mut config = config;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
