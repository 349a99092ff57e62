#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every read of a peer-supplied body on the Raft/ledger port is bounded: a request body
//! past the server's limit is refused with 413 before it is decoded, and an answer past the
//! client's limit is refused instead of being buffered whole.

mod common;

use std::sync::Arc;
use std::time::Duration;
use switchyard_ledger::FaultSwitch;
use switchyard_ledger::network::transport::MAX_RESPONSE_BYTES;
use switchyard_ledger::network::{HttpTransport, MAX_RPC_BODY_BYTES, TransportError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const SECRET: &str = "bounded-reads-secret";

fn transport() -> HttpTransport {
    HttpTransport::new(
        7,
        Arc::from(SECRET),
        Arc::new(FaultSwitch::default()),
        Duration::from_secs(1),
        None,
    )
}

#[tokio::test]
async fn a_request_body_past_the_server_limit_is_refused_with_413() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = common::config(1, &dir, "127.0.0.1:0");
    config.cluster_secret = SECRET.into();
    let node = common::start_with(config, Arc::new(switchyard_core::SystemClock)).await;
    let addr = node.raft_addr().to_string();
    let outcome = transport()
        .post(
            None,
            &addr,
            "/ledger/read",
            vec![0u8; MAX_RPC_BODY_BYTES + 1],
            Duration::from_secs(20),
        )
        .await;
    match outcome {
        Err(TransportError::Status { status, .. }) => assert_eq!(status.as_u16(), 413),
        // The server may close the connection as soon as it has refused the body.
        Err(TransportError::Connect(_)) => {}
        other => panic!("an oversized body must be refused: {other:?}"),
    }
    // A body within the limit reaches the route (and is refused there as bad bincode).
    let outcome = transport()
        .post(
            None,
            &addr,
            "/ledger/read",
            vec![0xff; 1024],
            Duration::from_secs(5),
        )
        .await;
    assert!(
        matches!(outcome, Err(TransportError::Status { status, .. }) if status.as_u16() == 400),
        "{outcome:?}"
    );
    node.shutdown().await;
}

#[tokio::test]
async fn an_answer_past_the_client_limit_is_refused() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let sent = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = sent.clone();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 4096];
        let _ = socket.read(&mut head).await;
        let size = 4 * MAX_RESPONSE_BYTES;
        let start = format!("HTTP/1.1 200 OK\r\ncontent-length: {size}\r\n\r\n");
        socket.write_all(start.as_bytes()).await.unwrap();
        let chunk = vec![0u8; 1 << 20];
        while counter.load(std::sync::atomic::Ordering::Relaxed) < size {
            if socket.write_all(&chunk).await.is_err() {
                return;
            }
            counter.fetch_add(chunk.len(), std::sync::atomic::Ordering::Relaxed);
        }
    });
    let outcome = transport()
        .post(
            None,
            &addr,
            "/raft/vote",
            vec![1, 2, 3],
            Duration::from_secs(30),
        )
        .await;
    assert!(
        matches!(outcome, Err(TransportError::Connect(_))),
        "{outcome:?}"
    );
    let streamed = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        streamed < 2 * MAX_RESPONSE_BYTES,
        "the client stopped reading near its bound ({streamed} bytes sent)"
    );
}
