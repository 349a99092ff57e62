//! What a local cluster takes from this machine: free ports, program paths, directories.

use rand::Rng;
use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

use super::error::ClusterError;

/// A relative program path that does not exist from the current directory is looked up
/// from the workspace root (so `target/debug/switchyard` works from anywhere in the repo).
pub fn resolve_program(program: &str) -> String {
    let path = Path::new(program);
    if path.is_absolute() || !program.contains('/') || path.exists() {
        return program.to_owned();
    }
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let candidate = workspace.join(path);
    if candidate.exists() {
        return candidate.display().to_string();
    }
    program.to_owned()
}

/// Ports are handed out below the kernel's ephemeral range (32768–60999 by default): a port
/// picked by binding port 0 lies inside it, and between the pick and the node's own bind any
/// outgoing connection on the machine may take it as its source port. Each process starts
/// at a random point of the range and never hands the same port out twice, so parallel test
/// processes rarely try the same one, and a port still bound elsewhere is skipped.
const PICK_RANGE: std::ops::Range<u16> = 20_000..30_000;
const UNSET: u32 = u32::MAX;
static PICK_CURSOR: AtomicU32 = AtomicU32::new(UNSET);

fn next_candidate() -> u16 {
    let span = u32::from(PICK_RANGE.end - PICK_RANGE.start);
    if PICK_CURSOR.load(Ordering::Relaxed) == UNSET {
        let start = rand::rng().random_range(0..span);
        let _ = PICK_CURSOR.compare_exchange(UNSET, start, Ordering::Relaxed, Ordering::Relaxed);
    }
    let offset = PICK_CURSOR.fetch_add(1, Ordering::Relaxed) % span;
    PICK_RANGE.start + u16::try_from(offset).unwrap_or(0)
}

pub(crate) fn free_port(ip: IpAddr) -> Result<u16, ClusterError> {
    for _ in 0..256 {
        let port = next_candidate();
        if std::net::TcpListener::bind((ip, port)).is_ok() {
            return Ok(port);
        }
    }
    std::net::TcpListener::bind((ip, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|source| ClusterError::Io {
            context: format!("picking a free port on {ip}"),
            source,
        })
}

pub(crate) fn create_dir(path: &Path) -> Result<(), ClusterError> {
    std::fs::create_dir_all(path).map_err(|source| ClusterError::Io {
        context: format!("creating {}", path.display()),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn picked_ports_are_distinct_bindable_and_outside_the_ephemeral_range() {
        let host = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let held = std::net::TcpListener::bind((host, 0)).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..50 {
            let port = free_port(host).unwrap();
            assert!(PICK_RANGE.contains(&port), "{port}");
            assert!(seen.insert(port), "{port} handed out twice");
            assert_ne!(port, held.local_addr().unwrap().port());
            std::net::TcpListener::bind((host, port)).unwrap();
        }
    }
}
