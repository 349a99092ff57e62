use super::*;
use crate::{HttpClientConfig, build_http_client};
use http_body_util::BodyExt;
use std::sync::atomic::AtomicUsize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A loopback HTTP/1.1 worker answering every request with `200 ok`, counting the
/// connections it accepted. With `close_after_answer`, it closes each connection after its
/// first answer (as a worker that drops idle connections does), without saying so.
struct Peer {
    uri: Uri,
    accepted: Arc<AtomicUsize>,
}

async fn peer(close_after_answer: bool) -> Peer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(answer(socket, close_after_answer));
        }
    });
    Peer {
        uri: format!("http://{addr}/").parse().unwrap(),
        accepted,
    }
}

/// Answers each request head (no request body is sent in these tests) with a 2-byte body.
async fn answer(mut socket: TcpStream, close_after_answer: bool) {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        while let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            buffer.drain(..end + 4);
            let reply = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            if socket.write_all(reply).await.is_err() || close_after_answer {
                return;
            }
        }
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

fn pool_to(uri: &Uri, config: &HttpClientConfig) -> ConnectionPool {
    let upstream = build_http_client(config).upstream().clone();
    ConnectionPool::new(upstream, uri.clone(), None)
}

fn get(path: &str) -> Request<Full<Bytes>> {
    Request::builder()
        .uri(path)
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// Sends one request and reads the answer's body whole.
async fn exchange(pool: &ConnectionPool) -> Result<Bytes, UpstreamError> {
    let response = pool.send(get("/v1/chat/completions")).await?;
    assert_eq!(response.status(), http::StatusCode::OK);
    Ok(response.into_body().collect().await.unwrap().to_bytes())
}

/// Waits (on real events: the connection task's progress) until the pool holds `count` idle
/// connections.
async fn until_idle(pool: &ConnectionPool, count: usize) {
    while pool.idle_count() != count {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn sequential_requests_reuse_one_connection() {
    let peer = peer(false).await;
    let pool = pool_to(&peer.uri, &HttpClientConfig::default());
    for _ in 0..5 {
        assert_eq!(exchange(&pool).await.unwrap(), "ok");
        tokio::time::timeout(Duration::from_secs(5), until_idle(&pool, 1))
            .await
            .unwrap();
    }
    assert_eq!(peer.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn concurrent_requests_open_their_own_connections_and_keep_them_idle() {
    let peer = peer(false).await;
    let pool = pool_to(&peer.uri, &HttpClientConfig::default());
    // Both find the pool empty, before either has a connection.
    let (first, second) = tokio::join!(pool.send(get("/a")), pool.send(get("/b")));
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(peer.accepted.load(Ordering::SeqCst), 2);
    first.into_body().collect().await.unwrap();
    second.into_body().collect().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), until_idle(&pool, 2))
        .await
        .unwrap();
    exchange(&pool).await.unwrap();
    assert_eq!(peer.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn no_more_than_the_idle_limit_is_kept() {
    let peer = peer(false).await;
    let config = HttpClientConfig {
        pool_max_idle_per_host: 1,
        ..HttpClientConfig::default()
    };
    let pool = pool_to(&peer.uri, &config);
    let (first, second) = tokio::join!(pool.send(get("/a")), pool.send(get("/b")));
    let (first, second) = (first.unwrap(), second.unwrap());
    assert_eq!(peer.accepted.load(Ordering::SeqCst), 2);
    first.into_body().collect().await.unwrap();
    second.into_body().collect().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), until_idle(&pool, 1))
        .await
        .unwrap();
    // Both answers are in: whatever was given back after the first is gone, not queued.
    tokio::task::yield_now().await;
    assert_eq!(pool.idle_count(), 1);
}

#[tokio::test]
async fn a_connection_the_worker_closed_is_not_reused() {
    let peer = peer(true).await;
    let pool = pool_to(&peer.uri, &HttpClientConfig::default());
    for round in 1..=3 {
        assert_eq!(exchange(&pool).await.unwrap(), "ok");
        assert_eq!(peer.accepted.load(Ordering::SeqCst), round);
        // The worker closed it after answering: once the client has seen that, the pool
        // holds nothing usable.
        tokio::time::timeout(Duration::from_secs(5), async {
            while pool.idle_open_count() != 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap();
    }
}

/// A pool whose connections stay idle 30 s, holding the one connection a first exchange made.
async fn one_idle_connection_kept_30s() -> (Peer, ConnectionPool) {
    let peer = peer(false).await;
    let config = HttpClientConfig {
        pool_idle_timeout: Duration::from_secs(30),
        ..HttpClientConfig::default()
    };
    let pool = pool_to(&peer.uri, &config);
    exchange(&pool).await.unwrap();
    until_idle(&pool, 1).await;
    (peer, pool)
}

#[tokio::test(start_paused = true)]
async fn an_idle_connection_past_the_idle_timeout_is_closed_and_replaced() {
    let (peer, pool) = one_idle_connection_kept_30s().await;
    tokio::time::advance(Duration::from_secs(10)).await;
    exchange(&pool).await.unwrap();
    assert_eq!(
        peer.accepted.load(Ordering::SeqCst),
        1,
        "still within its timeout"
    );
    until_idle(&pool, 1).await;
    tokio::time::advance(Duration::from_secs(31)).await;
    exchange(&pool).await.unwrap();
    assert_eq!(
        peer.accepted.load(Ordering::SeqCst),
        2,
        "expired: a new one"
    );
}

#[tokio::test(start_paused = true)]
async fn the_sweep_closes_expired_idle_connections_of_a_quiet_worker() {
    // The worker stays up: only the sweep may close its connection.
    let (_peer, pool) = one_idle_connection_kept_30s().await;
    tokio::time::sleep(Duration::from_secs(61)).await;
    assert_eq!(pool.idle_count(), 0);
}

#[tokio::test]
async fn a_refused_connect_is_a_connect_error() {
    // Bound, then closed: nothing listens on the port any more.
    let addr = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let pool = pool_to(
        &format!("http://{addr}/").parse().unwrap(),
        &HttpClientConfig::default(),
    );
    let error = pool.send(get("/v1/models")).await.unwrap_err();
    assert!(error.is_connect(), "{error:?}");
    assert_eq!(error.to_string(), "client error (Connect)");
}

#[tokio::test]
async fn a_worker_that_drops_the_request_unanswered_is_not_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut head = [0u8; 4096];
            let _ = socket.read(&mut head).await;
            drop(socket);
        }
    });
    let pool = pool_to(
        &format!("http://{addr}/").parse().unwrap(),
        &HttpClientConfig::default(),
    );
    let error = pool.send(get("/v1/models")).await.unwrap_err();
    assert!(!error.is_connect(), "{error:?}");
    assert!(matches!(error, UpstreamError::SendRequest(_)), "{error:?}");
}

#[tokio::test]
async fn an_absolute_uri_is_sent_as_its_path_with_the_pools_host() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (head_tx, head_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut head = [0u8; 4096];
        let n = socket.read(&mut head).await.unwrap();
        let _ = head_tx.send(String::from_utf8_lossy(&head[..n]).to_string());
        let _ = socket.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").await;
    });
    let uri: Uri = format!("http://{addr}/").parse().unwrap();
    let upstream = build_http_client(&HttpClientConfig::default())
        .upstream()
        .clone();
    let pool = ConnectionPool::new(upstream, uri, Some(HeaderValue::from_static("w1:9")));
    let response = pool
        .send(get(&format!("http://{addr}/v1/models?x=1")))
        .await
        .unwrap();
    assert_eq!(response.status(), http::StatusCode::NO_CONTENT);
    let head = head_rx.await.unwrap().to_ascii_lowercase();
    assert!(
        head.starts_with("get /v1/models?x=1 http/1.1\r\n"),
        "{head}"
    );
    assert!(head.contains("\r\nhost: w1:9\r\n"), "{head}");
}
