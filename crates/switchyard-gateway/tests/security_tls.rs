#![allow(clippy::unwrap_used, clippy::expect_used)]
//! TLS on the client listener with a local CA made by `deploy/tls/make-local-ca.sh` (a client
//! trusting the CA is served; plain HTTP on the TLS port is not), certificates reloaded
//! without a restart, and https workers verified against `upstream.tls_ca_path`.

mod common;
mod tls_support;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use switchyard_gateway::config::ListenerConfig;
use switchyard_workers::WorkerSpec;
use tls_support::*;
use tokio::net::TcpStream;

fn chat_request(body: &str) -> Vec<u8> {
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

const HEALTH: &[u8] = b"GET /health HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";

#[tokio::test]
async fn clients_trusting_the_local_ca_are_served_over_tls_and_plain_http_is_not() {
    let dir = tempfile::tempdir().unwrap();
    make_local_ca(dir.path(), &[]);
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.listener = ListenerConfig {
        tls_cert_path: path(dir.path(), "server.pem"),
        tls_key_path: path(dir.path(), "server-key.pem"),
        ..ListenerConfig::default()
    };
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    assert!(gateway.base_url().starts_with("https://"));
    let addr = gateway.local_addr();
    let tls = connector(&dir.path().join("ca.pem"), None);

    let body = chat("sim-llama", "hello over tls", false).to_string();
    let answer = tls_exchange(&tls, addr, &chat_request(&body)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("chat.completion"), "{answer}");

    // Plain HTTP on the TLS port gets no HTTP answer.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    let answer = exchange(&mut plain, HEALTH).await;
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
    assert!(untrusting.connect(localhost(), tcp).await.is_err());
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

#[tokio::test]
async fn a_replaced_listener_certificate_is_served_without_a_restart() {
    let old = tempfile::tempdir().unwrap();
    let new = tempfile::tempdir().unwrap();
    make_local_ca(old.path(), &[]);
    make_local_ca(new.path(), &[]);
    let live = tempfile::tempdir().unwrap();
    let (cert, key) = (
        live.path().join("server.pem"),
        live.path().join("server-key.pem"),
    );
    std::fs::copy(old.path().join("server.pem"), &cert).unwrap();
    std::fs::copy(old.path().join("server-key.pem"), &key).unwrap();
    let mut config = config_for(&[], "round_robin");
    config.server.tls_reload_interval_ms = 100;
    config.listener.tls_cert_path = cert.display().to_string();
    config.listener.tls_key_path = key.display().to_string();
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let addr = gateway.local_addr();
    let trusts_old = connector(&old.path().join("ca.pem"), None);
    let trusts_new = connector(&new.path().join("ca.pem"), None);
    let answer = tls_exchange(&trusts_old, addr, HEALTH).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(tls_exchange(&trusts_new, addr, HEALTH).await, "");

    // A connection opened before the swap keeps its session.
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut open = trusts_old.connect(localhost(), tcp).await.unwrap();

    // A half-written replacement (a certificate without its key) is refused, the old pair kept.
    std::fs::copy(new.path().join("server.pem"), &cert).unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let answer = tls_exchange(&trusts_old, addr, HEALTH).await;
    assert!(
        answer.starts_with("HTTP/1.1 200"),
        "mismatched pair refused: {answer}"
    );
    std::fs::copy(new.path().join("server-key.pem"), &key).unwrap();
    let swapped = eventually(Duration::from_secs(10), || async {
        tls_exchange(&trusts_new, addr, HEALTH)
            .await
            .starts_with("HTTP/1.1 200")
    })
    .await;
    assert!(swapped, "the new certificate is served without a restart");
    // A client that never connected before (no session to resume) sees only the new one.
    let fresh_old = connector(&old.path().join("ca.pem"), None);
    assert_eq!(tls_exchange(&fresh_old, addr, HEALTH).await, "");
    let answer = exchange(&mut open, HEALTH).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    gateway.shutdown().await;
}

fn https_worker(front: &TlsFront) -> WorkerSpec {
    WorkerSpec {
        name: "tls-worker".into(),
        url: format!("https://localhost:{}", front.addr.port()),
        models: Some(vec!["sim-llama".into()]),
        health_path: None,
        engine: None,
    }
}

#[tokio::test]
async fn https_workers_are_verified_against_the_configured_ca() {
    let dir = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    make_local_ca(dir.path(), &[]);
    make_local_ca(other.path(), &[]);
    let sims = start_sims(1).await;
    let front = TlsFront::start(
        &dir.path().join("server.pem"),
        &dir.path().join("server-key.pem"),
        sims[0].local_addr(),
    )
    .await;

    // Trusted CA: the worker is healthy and answers through TLS.
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![https_worker(&front)];
    config.upstream.tls_ca_path = path(dir.path(), "ca.pem");
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let reply = post_json(
        &format!("{base}/v1/chat/completions"),
        &chat("sim-llama", "hello https worker", false),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(sims[0].stats().requests_received >= 1);
    gateway.shutdown().await;

    // Another CA: the worker's certificate is refused, nothing reaches it.
    let live = tempfile::tempdir().unwrap();
    let live_ca = live.path().join("ca.pem");
    std::fs::copy(other.path().join("ca.pem"), &live_ca).unwrap();
    let served = sims[0].stats().requests_received;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![https_worker(&front)];
    config.upstream.tls_ca_path = live_ca.display().to_string();
    config.server.tls_reload_interval_ms = 100;
    config.health.health.interval_ms = 100;
    config.health.health.suspect_interval_ms = 100;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");
    let reply = post_json(&url, &chat("sim-llama", "hello untrusted worker", false)).await;
    assert_ne!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        sims[0].stats().requests_received,
        served,
        "no request crossed an untrusted TLS session"
    );

    // The worker CA file is replaced: the worker is trusted without a restart.
    std::fs::copy(dir.path().join("ca.pem"), &live_ca).unwrap();
    let trusted = eventually(Duration::from_secs(20), || async {
        post_json(&url, &chat("sim-llama", "hello again", false))
            .await
            .status
            == 200
    })
    .await;
    assert!(trusted, "the reloaded CA is used for new connections");
    gateway.shutdown().await;
}

#[tokio::test]
async fn an_https_worker_without_a_worker_ca_is_a_config_error_naming_the_field() {
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![WorkerSpec::parse_flag("https://127.0.0.1:1").unwrap()];
    let error = switchyard_gateway::start(config, None)
        .await
        .err()
        .expect("refused");
    assert!(error.to_string().contains("workers[0].url"), "{error}");
    let mut config = config_for(&[], "round_robin");
    config.upstream.tls_ca_path = "/nonexistent/ca.pem".into();
    let error = switchyard_gateway::start(config, None)
        .await
        .err()
        .expect("refused");
    assert!(
        error.to_string().contains("upstream.tls_ca_path"),
        "{error}"
    );
}

/// Whether `program args` runs and exits 0 (a probe for optional tools).
async fn available(program: &str, args: &[&str]) -> bool {
    tokio::process::Command::new(program)
        .args(args)
        .output()
        .await
        .is_ok_and(|o| o.status.success())
}

#[tokio::test]
async fn curl_and_the_openai_sdk_work_over_tls_with_the_local_ca() {
    let dir = tempfile::tempdir().unwrap();
    make_local_ca(dir.path(), &[]);
    let ca = path(dir.path(), "ca.pem");
    let sims = start_sims(2).await;
    let mut config = config_for(&sims, "round_robin");
    config.listener.tls_cert_path = path(dir.path(), "server.pem");
    config.listener.tls_key_path = path(dir.path(), "server-key.pem");
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let base = format!("https://localhost:{}", gateway.local_addr().port());

    if available("curl", &["--version"]).await {
        let body = chat("sim-llama", "hello curl", false).to_string();
        let url = format!("{base}/v1/chat/completions");
        let trusted = tokio::process::Command::new("curl")
            .args([
                "-sS",
                "--cacert",
                &ca,
                "-H",
                "content-type: application/json",
            ])
            .args(["-d", &body, &url])
            .output()
            .await
            .unwrap();
        let answer = String::from_utf8_lossy(&trusted.stdout);
        assert!(trusted.status.success(), "{answer}");
        assert!(answer.contains("chat.completion"), "{answer}");
        // Without the local CA (system trust only) curl refuses the server: exit 60.
        let untrusted = tokio::process::Command::new("curl")
            .args(["-sS", &url])
            .output()
            .await
            .unwrap();
        assert_eq!(
            untrusted.status.code(),
            Some(60),
            "curl without the CA refuses the server"
        );
    } else {
        eprintln!("SKIPPED (curl part): curl is not installed");
    }

    if available("python3", &["-c", "import openai"]).await {
        let stdout = openai_sdk_check(&[&base, "sim-llama", &ca]).await;
        assert!(
            stdout.contains("over TLS") && stdout.contains("embeddings ok"),
            "{stdout}"
        );
        eprintln!("{stdout}");
    } else {
        eprintln!("SKIPPED (SDK part): python3 with the `openai` package is not available");
    }
    gateway.shutdown().await;
}
