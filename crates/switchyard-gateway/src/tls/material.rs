//! PEM material that can be swapped while connections are served: a certificate chain with
//! its key ([`CertSource`], answering rustls' certificate resolvers on both ends) and a CA
//! bundle ([`CaSource`], verifying servers and client certificates through webpki). Each
//! remembers the bytes it was built from, so a reload that finds them unchanged does nothing,
//! and a reload that fails keeps the material in use.

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ResolvesClientCert, WebPkiServerVerifier};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use std::sync::Arc;

use super::error::{TlsError, provider};

fn read(field: &str, path: &str) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| file_error(field, path, e))
}

fn file_error(field: &str, path: &str, message: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        field: field.into(),
        path: path.into(),
        message: message.to_string(),
    }
}

fn parse_certs(
    field: &str,
    path: &str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(field, path, e))?;
    if certs.is_empty() {
        return Err(file_error(field, path, "no certificate in the file"));
    }
    Ok(certs)
}

/// A certificate chain and private key from two PEM files.
#[derive(Debug)]
pub struct CertSource {
    cert_field: &'static str,
    cert_path: String,
    key_field: &'static str,
    key_path: String,
    current: ArcSwap<CertifiedKey>,
    loaded_from: Mutex<(Vec<u8>, Vec<u8>)>,
}

impl CertSource {
    pub fn load(
        cert_field: &'static str,
        cert_path: &str,
        key_field: &'static str,
        key_path: &str,
    ) -> Result<Self, TlsError> {
        let cert_pem = read(cert_field, cert_path)?;
        let key_pem = read(key_field, key_path)?;
        let key = Self::build(
            cert_field, cert_path, &cert_pem, key_field, key_path, &key_pem,
        )?;
        Ok(Self {
            cert_field,
            cert_path: cert_path.into(),
            key_field,
            key_path: key_path.into(),
            current: ArcSwap::from_pointee(key),
            loaded_from: Mutex::new((cert_pem, key_pem)),
        })
    }

    fn build(
        cert_field: &str,
        cert_path: &str,
        cert_pem: &[u8],
        key_field: &str,
        key_path: &str,
        key_pem: &[u8],
    ) -> Result<CertifiedKey, TlsError> {
        let certs = parse_certs(cert_field, cert_path, cert_pem)?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| file_error(key_field, key_path, e))?;
        // Also checks that the key belongs to the certificate.
        CertifiedKey::from_der(certs, key, &provider())
            .map_err(|e| file_error(key_field, key_path, e))
    }

    /// Re-reads both files; swaps in the new pair when they changed and are valid.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let cert_pem = read(self.cert_field, &self.cert_path)?;
        let key_pem = read(self.key_field, &self.key_path)?;
        let mut loaded = self.loaded_from.lock();
        if loaded.0 == cert_pem && loaded.1 == key_pem {
            return Ok(false);
        }
        // Remembered even when refused: the same bad files are reported once, and any
        // further change (the rest of a write, a fix) is tried again.
        *loaded = (cert_pem, key_pem);
        let key = Self::build(
            self.cert_field,
            &self.cert_path,
            &loaded.0,
            self.key_field,
            &self.key_path,
            &loaded.1,
        )?;
        self.current.store(Arc::new(key));
        Ok(true)
    }

    pub fn describe(&self) -> &str {
        self.cert_field
    }
}

impl ResolvesServerCert for CertSource {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

impl ResolvesClientCert for CertSource {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// The verifiers built from one CA bundle.
#[derive(Debug)]
struct Verifiers {
    servers: Arc<WebPkiServerVerifier>,
    clients: Arc<dyn ClientCertVerifier>,
}

/// A CA bundle from a PEM file: trust anchors for servers (peers, workers) and, where it is
/// installed as the client verifier, for client certificates (peers). All verification is
/// webpki's; this only lets the anchors change under a running config.
#[derive(Debug)]
pub struct CaSource {
    field: &'static str,
    path: String,
    current: ArcSwap<Verifiers>,
    loaded_from: Mutex<Vec<u8>>,
}

impl CaSource {
    pub fn load(field: &'static str, path: &str) -> Result<Self, TlsError> {
        let pem = read(field, path)?;
        let verifiers = Self::build(field, path, &pem)?;
        Ok(Self {
            field,
            path: path.into(),
            current: ArcSwap::from_pointee(verifiers),
            loaded_from: Mutex::new(pem),
        })
    }

    fn build(field: &str, path: &str, pem: &[u8]) -> Result<Verifiers, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in parse_certs(field, path, pem)? {
            roots.add(cert).map_err(|e| file_error(field, path, e))?;
        }
        let roots = Arc::new(roots);
        let servers = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| file_error(field, path, e))?;
        let clients = WebPkiClientVerifier::builder_with_provider(roots, provider())
            .build()
            .map_err(|e| file_error(field, path, e))?;
        Ok(Verifiers { servers, clients })
    }

    /// Re-reads the bundle; swaps in new anchors when it changed and is valid.
    pub fn reload(&self) -> Result<bool, TlsError> {
        let pem = read(self.field, &self.path)?;
        let mut loaded = self.loaded_from.lock();
        if *loaded == pem {
            return Ok(false);
        }
        // Remembered even when refused, as for certificates.
        *loaded = pem;
        let verifiers = Self::build(self.field, &self.path, &loaded)?;
        self.current.store(Arc::new(verifiers));
        Ok(true)
    }

    pub fn describe(&self) -> &str {
        self.field
    }
}

/// The handshake-signature methods the server and the client verifier traits share, answered
/// by the current bundle's verifier for that end.
macro_rules! handshake_signatures {
    ($end:ident) => {
        handshake_signatures!($end: verify_tls12_signature, verify_tls13_signature);

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.current.load().$end.supported_verify_schemes()
        }
    };
    ($end:ident: $($method:ident),+) => {
        $(
            fn $method(
                &self,
                message: &[u8],
                cert: &CertificateDer<'_>,
                dss: &DigitallySignedStruct,
            ) -> Result<HandshakeSignatureValid, rustls::Error> {
                self.current.load().$end.$method(message, cert, dss)
            }
        )+
    };
}

impl ServerCertVerifier for CaSource {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.current.load().servers.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    handshake_signatures!(servers);
}

impl ClientCertVerifier for CaSource {
    fn client_auth_mandatory(&self) -> bool {
        true
    }

    // No hints: a replica has one certificate and sends it whatever the server names.
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.current
            .load()
            .clients
            .verify_client_cert(end_entity, intermediates, now)
    }

    handshake_signatures!(clients);
}
