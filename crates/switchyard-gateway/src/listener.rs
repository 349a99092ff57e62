//! The client listener: every connection is served by hyper's HTTP/1 server with a timer, so
//! a request head (and, between requests, the next one on a kept-alive connection) must
//! arrive within `listener.header_read_timeout_ms` or the connection is closed; at most
//! `listener.max_connections` are served at once (further ones wait in the accept queue).
//! A shutdown stops accepting and lets open connections finish their responses.

use axum::body::Body;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus::{IntCounter, IntGauge, Registry};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tracing::{debug, warn};

use crate::config::ListenerConfig;
pub use crate::http::app::App;

/// How long to back off when `accept` fails (file descriptors exhausted, say).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

/// Connection counters of the client listener.
#[derive(Clone)]
pub struct ListenerMetrics {
    open: IntGauge,
    accepted: IntCounter,
    closed_by_timeout: IntCounter,
}

impl ListenerMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let open = IntGauge::new(
            "switchyard_client_connections",
            "Client connections being served now.",
        )?;
        let accepted = IntCounter::new(
            "switchyard_client_connections_accepted_total",
            "Client connections accepted.",
        )?;
        let closed_by_timeout = IntCounter::new(
            "switchyard_client_connections_header_timeouts_total",
            "Client connections closed because a request head did not arrive in time.",
        )?;
        registry.register(Box::new(open.clone()))?;
        registry.register(Box::new(accepted.clone()))?;
        registry.register(Box::new(closed_by_timeout.clone()))?;
        Ok(Self {
            open,
            accepted,
            closed_by_timeout,
        })
    }
}

/// Serves `app` on `listener` (over TLS when `tls` is given) until `shutdown` completes, then
/// waits for the open connections to finish their in-flight responses.
pub async fn serve(
    listener: TcpListener,
    app: App,
    config: &ListenerConfig,
    metrics: ListenerMetrics,
    tls: Option<TlsAcceptor>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let slots = Arc::new(Semaphore::new(
        config.max_connections.min(Semaphore::MAX_PERMITS),
    ));
    let header_timeout = config.header_read_timeout();
    let (closing, close_signal) = watch::channel(false);
    let (alive, mut all_done) = mpsc::channel::<()>(1);
    tokio::pin!(shutdown);
    loop {
        let slot = tokio::select! {
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            () = &mut shutdown => break,
        };
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(error) => {
                    warn!(%error, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        metrics.accepted.inc();
        let app = app.clone();
        let metrics = metrics.clone();
        let close_signal = close_signal.clone();
        let alive = alive.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let _alive = alive;
            metrics.open.inc();
            match tls {
                None => serve_connection(stream, app, header_timeout, &metrics, close_signal).await,
                // The handshake is part of the head: it gets the same deadline.
                Some(tls) => match tokio::time::timeout(header_timeout, tls.accept(stream)).await {
                    Ok(Ok(stream)) => {
                        serve_connection(stream, app, header_timeout, &metrics, close_signal).await
                    }
                    Ok(Err(error)) => debug!(%error, "TLS handshake failed"),
                    Err(_) => metrics.closed_by_timeout.inc(),
                },
            }
            metrics.open.dec();
        });
    }
    let _ = closing.send(true);
    drop(alive);
    // Every connection task holds a sender: `None` once the last one has finished.
    let _ = all_done.recv().await;
}

/// Binds `listener.metrics_addr` when set.
pub async fn bind_metrics(
    config: &ListenerConfig,
) -> std::io::Result<Option<(TcpListener, std::net::SocketAddr)>> {
    if config.metrics_addr.is_empty() {
        return Ok(None);
    }
    let listener = TcpListener::bind(&config.metrics_addr).await?;
    let addr = listener.local_addr()?;
    Ok(Some((listener, addr)))
}

/// Serves the metrics routes on their own listener (plain HTTP, the same timeouts and
/// connection cap as the client listener) until the task is aborted; answers its address.
pub fn spawn_metrics(
    (listener, addr): (TcpListener, std::net::SocketAddr),
    app: App,
    config: &ListenerConfig,
    metrics: ListenerMetrics,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let config = config.clone();
    let task = tokio::spawn(async move {
        serve(
            listener,
            app,
            &config,
            metrics,
            None,
            std::future::pending(),
        )
        .await;
    });
    tracing::info!(addr = %addr, "metrics listening");
    (addr, task)
}

async fn serve_connection<I>(
    io: I,
    app: App,
    header_timeout: Duration,
    metrics: &ListenerMetrics,
    mut close_signal: watch::Receiver<bool>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        app.call(request.map(Body::new))
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .serve_connection(TokioIo::new(io), service);
    tokio::pin!(connection);
    let outcome = tokio::select! {
        outcome = connection.as_mut() => outcome,
        _ = close_signal.changed() => {
            connection.as_mut().graceful_shutdown();
            connection.as_mut().await
        }
    };
    if let Err(error) = outcome {
        if error.is_timeout() {
            metrics.closed_by_timeout.inc();
        }
        debug!(%error, "client connection ended with an error");
    }
}
