//! A fault-injecting TCP proxy for inter-node links (the kernel's `netem` is not available on
//! these machines). Nodes reach a peer through the peer's proxy; the proxy forwards bytes and,
//! on demand, delays them, "loses" segments, or blackholes the link.
//!
//! A TCP application never sees lost bytes, it sees them late (retransmission), so loss is
//! modelled as a retransmission delay on a share of segments. A blackhole holds all data, on
//! open and new connections, until it lifts: to the nodes it is a silent network, exactly
//! like a partition, and streams stay intact afterwards.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// The faults on one proxied link; the default passes everything through untouched.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LinkFault {
    pub delay: Duration,
    /// Uniform extra delay in `[0, jitter]` per segment.
    pub jitter: Duration,
    /// Share of segments lost, 0.0–1.0.
    pub loss: f64,
    /// How late a lost segment arrives.
    pub retransmit_delay: Duration,
    pub blackhole: bool,
}

impl LinkFault {
    pub fn delay(delay: Duration, jitter: Duration) -> Self {
        Self {
            delay,
            jitter,
            ..Self::default()
        }
    }

    /// `ratio` of segments lost, each retransmitted after 200 ms (a typical minimum RTO).
    pub fn loss(ratio: f64) -> Self {
        Self {
            loss: ratio.clamp(0.0, 1.0),
            retransmit_delay: Duration::from_millis(200),
            ..Self::default()
        }
    }

    pub fn blackhole() -> Self {
        Self {
            blackhole: true,
            ..Self::default()
        }
    }
}

#[derive(Debug, Default)]
struct Counters {
    connections: AtomicU64,
    bytes: AtomicU64,
    delayed_segments: AtomicU64,
    lost_segments: AtomicU64,
    held_segments: AtomicU64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    pub connections: u64,
    pub bytes: u64,
    pub delayed_segments: u64,
    pub lost_segments: u64,
    /// Segments that waited for a blackhole to lift.
    pub held_segments: u64,
}

/// A running proxy; dropping it stops the proxy and all its connections.
#[derive(Debug)]
pub struct FaultProxy {
    local_addr: SocketAddr,
    upstream: SocketAddr,
    faults: watch::Sender<LinkFault>,
    counters: Arc<Counters>,
    task: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Listens on `listen` (port 0: any free port) and forwards to `upstream`. `seed` makes
    /// jitter and loss reproducible.
    pub async fn start(listen: SocketAddr, upstream: SocketAddr, seed: u64) -> io::Result<Self> {
        let listener = TcpListener::bind(listen).await?;
        let local_addr = listener.local_addr()?;
        let (faults, receiver) = watch::channel(LinkFault::default());
        let counters = Arc::new(Counters::default());
        let task = tokio::spawn(accept_loop(
            listener,
            upstream,
            receiver,
            counters.clone(),
            seed,
        ));
        Ok(Self {
            local_addr,
            upstream,
            faults,
            counters,
            task: Some(task),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// Applies to open connections at their next segment, and to new ones.
    pub fn set_fault(&self, fault: LinkFault) {
        self.faults.send_replace(fault);
    }

    pub fn clear(&self) {
        self.set_fault(LinkFault::default());
    }

    pub fn fault(&self) -> LinkFault {
        self.faults.borrow().clone()
    }

    pub fn stats(&self) -> ProxyStats {
        let c = &self.counters;
        ProxyStats {
            connections: c.connections.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            delayed_segments: c.delayed_segments.load(Ordering::Relaxed),
            lost_segments: c.lost_segments.load(Ordering::Relaxed),
            held_segments: c.held_segments.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting and closes every proxied connection.
    pub async fn shutdown(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// Owns every connection task: aborting it (proxy shutdown) drops the set, which aborts them.
async fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    faults: watch::Receiver<LinkFault>,
    counters: Arc<Counters>,
    seed: u64,
) {
    let mut connections = JoinSet::new();
    let mut accepted_count = 0u64;
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    accepted_count += 1;
                    counters.connections.fetch_add(1, Ordering::Relaxed);
                    let connection_seed = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ accepted_count;
                    connections.spawn(serve(client, upstream, faults.clone(), counters.clone(), connection_seed));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "fault proxy accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// The current fault once it is not a blackhole (waiting for that if needed).
async fn passable(faults: &mut watch::Receiver<LinkFault>) -> LinkFault {
    loop {
        let current = faults.borrow_and_update().clone();
        if !current.blackhole || faults.changed().await.is_err() {
            return current;
        }
    }
}

async fn serve(
    client: TcpStream,
    upstream: SocketAddr,
    mut faults: watch::Receiver<LinkFault>,
    counters: Arc<Counters>,
    seed: u64,
) {
    // A blackholed link does not even let the connection reach the peer.
    passable(&mut faults).await;
    let server = match TcpStream::connect(upstream).await {
        Ok(server) => server,
        Err(e) => {
            tracing::debug!(%upstream, error = %e, "fault proxy: upstream unreachable");
            return;
        }
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let up = pump(
        client_read,
        server_write,
        faults.clone(),
        counters.clone(),
        seed,
    );
    let down = pump(
        server_read,
        client_write,
        faults,
        counters,
        seed.rotate_left(17),
    );
    if let Err(e) = tokio::try_join!(up, down) {
        tracing::debug!(error = %e, "fault proxy connection closed");
    }
}

async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut faults: watch::Receiver<LinkFault>,
    counters: Arc<Counters>,
    seed: u64,
) -> io::Result<()> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let read = from.read(&mut buf).await?;
        if read == 0 {
            return to.shutdown().await;
        }
        if faults.borrow().blackhole {
            counters.held_segments.fetch_add(1, Ordering::Relaxed);
        }
        let fault = passable(&mut faults).await;
        let mut wait = fault.delay;
        if !fault.jitter.is_zero() {
            wait += fault.jitter.mul_f64(rng.random::<f64>());
        }
        if fault.loss > 0.0 && rng.random_bool(fault.loss.clamp(0.0, 1.0)) {
            counters.lost_segments.fetch_add(1, Ordering::Relaxed);
            wait += fault.retransmit_delay;
        }
        if !wait.is_zero() {
            counters.delayed_segments.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(wait).await;
        }
        to.write_all(&buf[..read]).await?;
        counters.bytes.fetch_add(read as u64, Ordering::Relaxed);
    }
}
