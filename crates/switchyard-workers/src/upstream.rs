//! The request path's connections to one worker: HTTP/1.1 keep-alive connections made by the
//! connector every worker shares (TCP with the connect timeout, TLS for `https://`), kept
//! idle by the worker's own handle. A request finds its worker's idle connections without
//! hashing a pool key and gives its connection back the same way, which the general pooled
//! client does on every checkout and return.
//!
//! What the general client did, kept: the most recently used idle connection is taken first;
//! a connection is idle at most `pool_idle_timeout` and at most `pool_max_idle_per_host`
//! are kept; a connection goes back to the pool only once it is ready for another request
//! (after the answer's body, for a streamed one); a request that a reused connection closed
//! on before sending it is sent again on another; a failed connect is told apart from a
//! failure after the request went out, which is what a retry elsewhere depends on.

use bytes::Bytes;
use http::{HeaderValue, Request, Response, Uri, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::time::Instant;
use tower::Service;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Sender = SendRequest<Full<Bytes>>;

/// Shortest pause between two sweeps of a pool's expired idle connections.
const MIN_SWEEP_INTERVAL: Duration = Duration::from_millis(90);

/// How connections to workers are made and how long they are kept idle: one per registry,
/// shared by every worker's pool.
#[derive(Clone)]
pub struct UpstreamConnector {
    connector: HttpsConnector<HttpConnector>,
    idle_timeout: Duration,
    max_idle: usize,
}

impl UpstreamConnector {
    pub(crate) fn new(
        connector: HttpsConnector<HttpConnector>,
        idle_timeout: Duration,
        max_idle: usize,
    ) -> Self {
        Self {
            connector,
            idle_timeout,
            max_idle,
        }
    }
}

impl std::fmt::Debug for UpstreamConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamConnector")
            .field("idle_timeout", &self.idle_timeout)
            .field("max_idle", &self.max_idle)
            .finish_non_exhaustive()
    }
}

/// Why a request to a worker failed. The messages are the general pooled client's.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// No connection could be made (refused, unreachable, connect timeout, TLS handshake):
    /// nothing reached the worker.
    #[error("client error (Connect)")]
    Connect(#[source] BoxError),
    /// The exchange failed once a connection was made: the worker may have seen the request.
    #[error("client error (SendRequest)")]
    SendRequest(#[source] hyper::Error),
    /// A new connection closed before the request went out.
    #[error("client error (Canceled)")]
    Canceled(#[source] hyper::Error),
}

impl UpstreamError {
    /// Whether the failure came before any connection existed (so the worker saw nothing).
    pub fn is_connect(&self) -> bool {
        matches!(self, UpstreamError::Connect(_))
    }
}

/// One worker's idle connections.
pub(crate) struct ConnectionPool {
    shared: Arc<PoolShared>,
}

struct PoolShared {
    connector: UpstreamConnector,
    /// The worker's scheme and authority: where the connector dials.
    destination: Uri,
    /// The `Host` header of a request that carries none.
    host: Option<HeaderValue>,
    /// Oldest first: a connection is taken from the back, and expired ones gather in front.
    idle: Mutex<Vec<IdleConnection>>,
    sweeper_started: AtomicBool,
}

struct IdleConnection {
    sender: Sender,
    since: Instant,
}

impl ConnectionPool {
    pub(crate) fn new(
        connector: UpstreamConnector,
        destination: Uri,
        host: Option<HeaderValue>,
    ) -> Self {
        Self {
            shared: Arc::new(PoolShared {
                connector,
                destination,
                host,
                idle: Mutex::new(Vec::new()),
                sweeper_started: AtomicBool::new(false),
            }),
        }
    }

    /// Sends `request` (its URI in origin form; an absolute one is reduced to its path) on an
    /// idle connection, or on a new one when none is idle, and returns the answer's head.
    pub(crate) async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        if request.uri().scheme().is_some() {
            let target = request.uri().path_and_query().cloned();
            *request.uri_mut() = target.map_or_else(|| Uri::from_static("/"), Uri::from);
        }
        if let Some(host) = &self.shared.host
            && !request.headers().contains_key(header::HOST)
        {
            request.headers_mut().insert(header::HOST, host.clone());
        }
        loop {
            let (mut sender, reused) = match self.shared.checkout() {
                Some(sender) => (sender, true),
                // Boxed: the connect and handshake state is large and only a new connection
                // needs it.
                None => (Box::pin(self.shared.connect()).await?, false),
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    PoolShared::give_back(&self.shared, sender);
                    return Ok(response);
                }
                Err(mut failed) => match failed.take_message() {
                    // The idle connection closed before the request went out: the worker saw
                    // nothing, so another connection may carry it.
                    Some(unsent) if reused => request = unsent,
                    Some(_) => return Err(UpstreamError::Canceled(failed.into_error())),
                    None => return Err(UpstreamError::SendRequest(failed.into_error())),
                },
            }
        }
    }

    /// Idle connections held right now.
    #[cfg(test)]
    pub(crate) fn idle_count(&self) -> usize {
        self.shared.idle.lock().len()
    }

    /// Idle connections held right now that the worker has not closed.
    #[cfg(test)]
    pub(crate) fn idle_open_count(&self) -> usize {
        let idle = self.shared.idle.lock();
        idle.iter().filter(|c| !c.sender.is_closed()).count()
    }
}

impl std::fmt::Debug for ConnectionPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionPool")
            .field("destination", &self.shared.destination)
            .field("idle", &self.shared.idle.lock().len())
            .finish()
    }
}

impl PoolShared {
    /// The most recently used idle connection still open and not expired; the ones passed
    /// over on the way are closed.
    fn checkout(&self) -> Option<Sender> {
        let now = Instant::now();
        let mut idle = self.idle.lock();
        while let Some(connection) = idle.pop() {
            if now.duration_since(connection.since) < self.connector.idle_timeout
                && connection.sender.is_ready()
            {
                return Some(connection.sender);
            }
        }
        None
    }

    /// A new connection, ready for a request.
    async fn connect(&self) -> Result<Sender, UpstreamError> {
        let io = self
            .connector
            .connector
            .clone()
            .call(self.destination.clone())
            .await
            .map_err(UpstreamError::Connect)?;
        let (mut sender, connection) = http1::Builder::new()
            .handshake(io)
            .await
            .map_err(UpstreamError::SendRequest)?;
        // The connection's own error explains a sender that closed before it was ever ready.
        let (failed_tx, failed_rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            if let Err(error) = connection.with_upgrades().await {
                tracing::debug!("client connection error: {error:?}");
                let _ = failed_tx.send(error);
            }
        });
        match sender.ready().await {
            Ok(()) => Ok(sender),
            Err(error) if error.is_closed() => {
                Err(UpstreamError::SendRequest(failed_rx.await.unwrap_or(error)))
            }
            Err(error) => Err(UpstreamError::SendRequest(error)),
        }
    }

    /// Puts a connection whose answer's head has arrived back in the pool: at once when it
    /// is ready for another request, else once it is (its body read), unless it closes first.
    fn give_back(shared: &Arc<PoolShared>, mut sender: Sender) {
        if sender.is_ready() {
            shared.put(sender);
        } else if !sender.is_closed() {
            let pool = Arc::downgrade(shared);
            tokio::spawn(async move {
                if sender.ready().await.is_ok()
                    && let Some(pool) = pool.upgrade()
                {
                    pool.put(sender);
                }
            });
        }
    }

    fn put(self: &Arc<Self>, sender: Sender) {
        {
            let mut idle = self.idle.lock();
            if idle.len() >= self.connector.max_idle {
                return;
            }
            idle.push(IdleConnection {
                sender,
                since: Instant::now(),
            });
        }
        if !self.sweeper_started.load(Ordering::Relaxed)
            && !self.sweeper_started.swap(true, Ordering::Relaxed)
        {
            spawn_sweeper(Arc::downgrade(self), self.connector.idle_timeout);
        }
    }

    /// Closes the idle connections past the idle timeout or closed by the worker.
    fn sweep(&self) {
        let now = Instant::now();
        let timeout = self.connector.idle_timeout;
        self.idle.lock().retain(|connection| {
            now.duration_since(connection.since) < timeout && !connection.sender.is_closed()
        });
    }
}

/// Sweeps the pool every idle timeout, so a worker that gets no more requests does not keep
/// its idle connections open; ends with the pool.
fn spawn_sweeper(pool: Weak<PoolShared>, idle_timeout: Duration) {
    let interval = idle_timeout.max(MIN_SWEEP_INTERVAL);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            let Some(pool) = pool.upgrade() else {
                return;
            };
            pool.sweep();
        }
    });
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
