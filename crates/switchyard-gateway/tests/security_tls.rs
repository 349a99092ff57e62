#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The client listener over TLS, with a local CA made by `deploy/tls/make-local-ca.sh`:
//! a client trusting the CA is served; plain HTTP on the TLS port is not.

mod common;

use common::*;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use switchyard_gateway::config::ListenerConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn make_local_ca(dir: &Path) {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/tls/make-local-ca.sh");
    let status = std::process::Command::new("bash")
        .arg(script)
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run make-local-ca.sh (needs openssl)");
    assert!(status.success());
}

fn connector(ca: &Path) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn exchange<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    stream: &mut S,
    request: &str,
) -> String {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut answer)).await;
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test]
async fn clients_trusting_the_local_ca_are_served_over_tls_and_plain_http_is_not() {
    let dir = tempfile::tempdir().unwrap();
    make_local_ca(dir.path());
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.listener = ListenerConfig {
        tls_cert_path: dir.path().join("server.pem").display().to_string(),
        tls_key_path: dir.path().join("server-key.pem").display().to_string(),
        ..ListenerConfig::default()
    };
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    assert!(gateway.base_url().starts_with("https://"));
    let addr = gateway.local_addr();
    let tls = connector(&dir.path().join("ca.pem"));
    let name = ServerName::try_from("localhost").unwrap();

    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut stream = tls.connect(name.clone(), tcp).await.unwrap();
    let body = chat("sim-llama", "hello over tls", false).to_string();
    let answer = exchange(
        &mut stream,
        &format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("chat.completion"), "{answer}");

    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    let answer = exchange(
        &mut plain,
        "GET /health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");

    // A client that does not trust the CA refuses the server.
    let untrusting = {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    };
    let tcp = TcpStream::connect(addr).await.unwrap();
    assert!(untrusting.connect(name, tcp).await.is_err());
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_tls_listener_with_a_missing_key_file_does_not_start_and_names_the_field() {
    let mut config = config_for(&[], "round_robin");
    config.listener.tls_cert_path = "/nonexistent/server.pem".into();
    config.listener.tls_key_path = "/nonexistent/server-key.pem".into();
    let error = switchyard_gateway::start(config, None)
        .await
        .err()
        .expect("refused");
    assert!(
        error.to_string().contains("listener.tls_cert_path"),
        "{error}"
    );
    let mut half = config_for(&[], "round_robin");
    half.listener.tls_cert_path = "/x.pem".into();
    let error = switchyard_gateway::start(half, None)
        .await
        .err()
        .expect("refused");
    assert!(
        error.to_string().contains("listener.tls_key_path"),
        "{error}"
    );
}
