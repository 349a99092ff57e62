//! Configuration of a [`super::LocalProcessCluster`] (loadable from TOML; see
//! `cluster.example.toml`) and the address plan derived from it.

use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

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

pub(crate) fn free_port(ip: IpAddr) -> Result<u16, ClusterError> {
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
