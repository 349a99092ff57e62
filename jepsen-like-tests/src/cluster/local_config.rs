//! Configuration of a [`super::LocalProcessCluster`] (loadable from TOML; see
//! `cluster.example.toml`) and the address plan derived from it.

use rand::Rng;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::ClusterError;
use super::template::NodeTemplate;
use super::workers::WorkerFleetConfig;
use crate::NodeId;
use crate::nemesis::command::SystemRunner;
use crate::nemesis::netns::NetnsLab;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum NetworkMode {
    Loopback,
    /// One namespace per node; `prefix` and `subnet` must be unique among concurrent labs.
    Netns {
        prefix: String,
        subnet: u8,
    },
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LocalClusterConfig {
    pub nodes: u32,
    pub template: NodeTemplate,
    /// Simulated inference workers the nodes route to (none by default).
    pub workers: WorkerFleetConfig,
    /// Node data directories and logs go here.
    pub work_dir: PathBuf,
    pub network: NetworkMode,
    /// Ports inside namespaces (on loopback free ports are picked).
    pub client_port: u16,
    pub raft_port: u16,
    /// Front each node's Raft address with a fault proxy that peers use.
    pub link_proxies: bool,
    /// Namespaces: proxy of node N listens on the bridge address, port `base + N`.
    pub proxy_port_base: u16,
    pub secret: String,
    pub ready_timeout_ms: u64,
    pub stop_grace_ms: u64,
    pub seed: u64,
}

impl Default for LocalClusterConfig {
    fn default() -> Self {
        Self {
            nodes: 3,
            template: NodeTemplate::default(),
            workers: WorkerFleetConfig::default(),
            work_dir: PathBuf::from("results/nodes"),
            network: NetworkMode::Loopback,
            client_port: 8080,
            raft_port: 7000,
            link_proxies: true,
            proxy_port_base: 17_000,
            secret: "chaos-cluster-secret".into(),
            ready_timeout_ms: 30_000,
            stop_grace_ms: 5_000,
            seed: 0,
        }
    }
}

/// Where a node listens: (client, raft, advertised raft) addresses.
pub(crate) fn plan_addresses(
    config: &LocalClusterConfig,
    lab: Option<&NetnsLab<SystemRunner>>,
    id: NodeId,
) -> Result<(SocketAddr, SocketAddr, SocketAddr), ClusterError> {
    Ok(match lab {
        None => {
            let host = IpAddr::V4(Ipv4Addr::LOCALHOST);
            let raft = SocketAddr::new(host, free_port(host)?);
            let advertised = if config.link_proxies {
                SocketAddr::new(host, free_port(host)?)
            } else {
                raft
            };
            (SocketAddr::new(host, free_port(host)?), raft, advertised)
        }
        Some(lab) => {
            let host = IpAddr::V4(lab.node_ip(id));
            let raft = SocketAddr::new(host, config.raft_port);
            let advertised = if config.link_proxies {
                let port = config.proxy_port_base.saturating_add(id as u16);
                SocketAddr::new(IpAddr::V4(lab.bridge_ip()), port)
            } else {
                raft
            };
            (SocketAddr::new(host, config.client_port), raft, advertised)
        }
    })
}

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
