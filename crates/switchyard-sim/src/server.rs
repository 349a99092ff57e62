//! The worker handle and its hyper accept loop.
//!
//! A custom loop (rather than `axum::serve`) lets the `reset` fault abort a
//! connection: the service returns an error, hyper drops the connection, and the
//! socket is closed with `SO_LINGER = 0`, which sends a TCP RST.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use switchyard_core::header_names;

use axum::Router;
use axum::body::Body;
use http::{HeaderValue, Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tower::ServiceExt;

use crate::config::SimConfig;
use crate::engine::{Engine, SimStats};
use crate::fault::{Fault, path_is_fault_exempt};
use crate::http::router;

/// How long shutdown waits for in-flight requests before cutting them off.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);
/// Pause after a failed accept (e.g. out of file descriptors) before retrying.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A running simulated worker. Dropping it, or calling [`SimWorker::shutdown`],
/// stops the server and every connection task it owns.
pub struct SimWorker {
    engine: Arc<Engine>,
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    server: Option<JoinHandle<()>>,
}

impl SimWorker {
    /// Binds `addr` (port 0 picks a free port) and starts serving.
    pub async fn start(config: SimConfig, addr: SocketAddr) -> io::Result<SimWorker> {
        let engine = Arc::new(Engine::new(config).map_err(io::Error::other)?);
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let server = tokio::spawn(accept_loop(listener, Arc::clone(&engine), shutdown_rx));
        tracing::debug!(worker = %engine.config.name, %local_addr, "sim worker started");
        Ok(SimWorker {
            engine,
            local_addr,
            shutdown,
            server: Some(server),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// `http://IP:PORT`; a wildcard bind is reported as loopback so the URL is dialable.
    pub fn base_url(&self) -> String {
        let mut addr = self.local_addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(Ipv4Addr::LOCALHOST.into());
        }
        format!("http://{addr}")
    }

    pub fn name(&self) -> &str {
        &self.engine.config.name
    }

    /// Snapshot of the worker's counters and load.
    pub fn stats(&self) -> SimStats {
        self.engine.stats()
    }

    /// Same effect as `POST /admin/fault`.
    pub fn set_fault(&self, fault: Fault) {
        self.engine.faults.set(fault);
    }

    /// Stops accepting, lets in-flight requests finish for a short grace period,
    /// then cuts the rest off.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for SimWorker {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        if let Some(server) = self.server.take() {
            // Aborting the loop drops its JoinSet, which aborts every connection.
            server.abort();
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    engine: Arc<Engine>,
    mut shutdown: watch::Receiver<bool>,
) {
    let app = router(Arc::clone(&engine));
    let worker_header = HeaderValue::from_str(&engine.config.name)
        .unwrap_or_else(|_| HeaderValue::from_static("sim"));
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let conn = Connection {
                        app: app.clone(),
                        engine: Arc::clone(&engine),
                        worker_header: worker_header.clone(),
                    };
                    connections.spawn(conn.serve(stream, shutdown.clone()));
                }
                Err(err) => {
                    tracing::warn!(%err, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::debug!(
            remaining = connections.len(),
            "grace period over, aborting connections"
        );
    }
}

/// Everything one connection's service needs.
#[derive(Clone)]
struct Connection {
    app: Router,
    engine: Arc<Engine>,
    worker_header: HeaderValue,
}

/// The service asks for the connection to be reset by returning this error.
#[derive(Debug, thiserror::Error)]
#[error("connection reset by injected fault")]
struct ResetConnection;

impl Connection {
    async fn serve(self, stream: TcpStream, mut shutdown: watch::Receiver<bool>) {
        // Streaming answers are many tiny writes; Nagle would batch them.
        let _ = stream.set_nodelay(true);
        let reset_requested = Arc::new(AtomicBool::new(false));
        let io = TokioIo::new(ResettableStream {
            inner: stream,
            reset_requested: Arc::clone(&reset_requested),
        });
        let service =
            service_fn(move |request| self.clone().handle(request, Arc::clone(&reset_requested)));
        // No header-read timeout: it would also close idle keep-alive connections
        // after 30 s, which under paused test time fires at arbitrary moments.
        let connection = http1::Builder::new()
            .header_read_timeout(None)
            .serve_connection(io, service);
        tokio::pin!(connection);
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(err) = result {
                    tracing::debug!(%err, "connection ended with an error");
                }
            }
            _ = shutdown.changed() => {
                connection.as_mut().graceful_shutdown();
                let _ = connection.as_mut().await;
            }
        }
    }

    async fn handle(
        self,
        request: Request<Incoming>,
        reset_requested: Arc<AtomicBool>,
    ) -> Result<Response<Body>, ResetConnection> {
        let path = request.uri().path();
        if self.engine.faults.get() == Fault::Reset && !path_is_fault_exempt(path) {
            reset_requested.store(true, Ordering::Relaxed);
            return Err(ResetConnection);
        }
        let request_id = request.headers().get(header_names::REQUEST_ID).cloned();
        let Ok(mut response) = self.app.oneshot(request.map(Body::new)).await;
        let headers = response.headers_mut();
        headers.insert(header_names::SIM_WORKER, self.worker_header);
        if let Some(request_id) = request_id {
            headers.insert(header_names::REQUEST_ID, request_id);
        }
        Ok(response)
    }
}

/// A TCP stream that, when asked, closes with an RST instead of a FIN.
struct ResettableStream {
    inner: TcpStream,
    reset_requested: Arc<AtomicBool>,
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset_requested.load(Ordering::Relaxed)
            && let Err(err) = self.inner.set_zero_linger()
        {
            tracing::debug!(%err, "could not arm connection reset");
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // A FIN first would let the client read a clean EOF before the RST.
        if this.reset_requested.load(Ordering::Relaxed) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
