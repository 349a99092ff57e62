//! The Raft/ledger server's side of mutual TLS: TCP connections are accepted at once and
//! their handshakes completed concurrently (a bounded number at a time, each within a
//! deadline), so a peer that stalls its handshake holds up nobody else. Only connections
//! whose client certificate the server config's verifier accepted reach the routes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// Handshakes in progress at once; further connections wait in the accept queue.
const MAX_HANDSHAKES: usize = 256;
/// A peer must finish its handshake within this long.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// An `axum::serve` listener yielding only connections that completed the TLS handshake.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    acceptor_task: JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.acceptor_task.abort();
    }
}

impl TlsListener {
    /// Starts accepting on `listener`; `on_refused` is called for every failed handshake.
    pub fn new(
        listener: TcpListener,
        config: Arc<rustls::ServerConfig>,
        on_refused: impl Fn(&std::io::Error) + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let local = listener.local_addr()?;
        let (done, ready) = mpsc::channel(MAX_HANDSHAKES);
        let acceptor = TlsAcceptor::from(config);
        let slots = Arc::new(Semaphore::new(MAX_HANDSHAKES));
        let on_refused = Arc::new(on_refused);
        let acceptor_task = tokio::spawn(async move {
            loop {
                let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
                    return;
                };
                let (stream, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        tracing::warn!(%error, "raft listener accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let (acceptor, done, on_refused) =
                    (acceptor.clone(), done.clone(), Arc::clone(&on_refused));
                tokio::spawn(async move {
                    let handshake =
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream));
                    let outcome = handshake.await;
                    drop(slot);
                    match outcome {
                        Ok(Ok(tls)) => {
                            let _ = done.send((tls, peer)).await;
                        }
                        Ok(Err(error)) => {
                            tracing::warn!(%peer, %error, "peer refused: TLS handshake failed");
                            on_refused(&error);
                        }
                        Err(_) => {
                            let error = std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                "TLS handshake timed out",
                            );
                            tracing::warn!(%peer, %error, "peer refused");
                            on_refused(&error);
                        }
                    }
                });
            }
        });
        Ok(Self {
            ready,
            local,
            acceptor_task,
        })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The acceptor task ended (the listener is being dropped): accept nothing more.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
