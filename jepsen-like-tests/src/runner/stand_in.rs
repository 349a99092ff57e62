//! A stand-in node for testing the process and network machinery without the real gateway:
//! a TCP echo server on any number of addresses, and a probe that checks an echo round trip
//! (run inside a namespace to see what a partition lets through).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// Echoes every connection on every address until the process ends.
pub async fn serve_echo(listen: &[SocketAddr]) -> io::Result<()> {
    let mut listeners = Vec::new();
    for addr in listen {
        listeners.push(TcpListener::bind(addr).await?);
    }
    let mut tasks = JoinSet::new();
    for listener in listeners {
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((stream, _)) = accepted {
                            connections.spawn(echo(stream));
                        }
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
    }
    while tasks.join_next().await.is_some() {}
    Ok(())
}

async fn echo(mut stream: TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if stream.write_all(&buf[..n]).await.is_err() {
                    return;
                }
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeResult {
    Echoed,
    /// Nothing came back in time (a silent drop, or a paused peer).
    TimedOut,
    /// Refused or reset: a fast failure.
    Failed(String),
}

impl ProbeResult {
    /// Exit code of the `probe-tcp` subcommand.
    pub fn exit_code(&self) -> u8 {
        match self {
            ProbeResult::Echoed => 0,
            ProbeResult::TimedOut => 3,
            ProbeResult::Failed(_) => 4,
        }
    }
}

/// Connects, sends a line and waits for it to come back, all within `limit`.
pub async fn probe_echo(addr: SocketAddr, limit: Duration) -> ProbeResult {
    let round_trip = async {
        let mut stream = TcpStream::connect(addr).await?;
        stream.write_all(b"ping\n").await?;
        let mut buf = [0u8; 5];
        stream.read_exact(&mut buf).await?;
        Ok::<bool, io::Error>(&buf == b"ping\n")
    };
    match tokio::time::timeout(limit, round_trip).await {
        Ok(Ok(true)) => ProbeResult::Echoed,
        Ok(Ok(false)) => ProbeResult::Failed("echo mismatch".into()),
        Ok(Err(e)) => ProbeResult::Failed(e.to_string()),
        Err(_) => ProbeResult::TimedOut,
    }
}
