//! The fault-injecting proxy on loopback, in front of an echo server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use jepsen_like_tests::nemesis::proxy::{FaultProxy, LinkFault};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn echo_server() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            connections.spawn(async move {
                let mut buf = [0u8; 1024];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (addr, task)
}

async fn round_trip(stream: &mut TcpStream, payload: &[u8], limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    stream.write_all(payload).await.unwrap();
    let mut buf = vec![0u8; payload.len()];
    match tokio::time::timeout(limit, stream.read_exact(&mut buf)).await {
        Ok(Ok(_)) => {
            assert_eq!(buf, payload);
            Some(started.elapsed())
        }
        _ => None,
    }
}

#[tokio::test]
async fn proxy_passes_delays_loses_and_blackholes_on_demand() {
    let (upstream, server) = echo_server().await;
    let proxy = FaultProxy::start("127.0.0.1:0".parse().unwrap(), upstream, 42)
        .await
        .unwrap();
    let mut conn = TcpStream::connect(proxy.local_addr()).await.unwrap();
    let second = Duration::from_secs(2);

    assert!(round_trip(&mut conn, b"plain", second).await.is_some());
    assert_eq!(proxy.stats().delayed_segments, 0);

    proxy.set_fault(LinkFault::delay(Duration::from_millis(150), Duration::ZERO));
    let took = round_trip(&mut conn, b"slow", second).await.unwrap();
    assert!(
        took >= Duration::from_millis(300),
        "both directions delayed: {took:?}"
    );

    proxy.set_fault(LinkFault::loss(1.0));
    let took = round_trip(&mut conn, b"lossy", second).await.unwrap();
    assert!(
        took >= Duration::from_millis(400),
        "every segment retransmitted: {took:?}"
    );
    assert!(proxy.stats().lost_segments >= 2);

    proxy.set_fault(LinkFault::blackhole());
    assert!(
        round_trip(&mut conn, b"void", Duration::from_millis(300))
            .await
            .is_none(),
        "silently held"
    );
    let mut fresh = TcpStream::connect(proxy.local_addr()).await.unwrap();
    assert!(
        round_trip(&mut fresh, b"new", Duration::from_millis(300))
            .await
            .is_none(),
        "new links too"
    );
    proxy.clear();
    let mut late = [0u8; 4];
    tokio::time::timeout(second, conn.read_exact(&mut late))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&late, b"void", "held data arrives intact once healed");
    tokio::time::timeout(second, fresh.read_exact(&mut late[..3]))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&late[..3], b"new");
    assert!(proxy.stats().held_segments >= 1);
    assert!(proxy.stats().connections >= 2);

    let addr = proxy.local_addr();
    proxy.shutdown().await;
    let mut buf = [0u8; 1];
    let closed = tokio::time::timeout(second, conn.read(&mut buf))
        .await
        .unwrap();
    assert!(
        matches!(closed, Ok(0) | Err(_)),
        "open links close with the proxy"
    );
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "nothing listens any more"
    );
    server.abort();
}
