//! Configuration of a [`super::LocalProcessCluster`] (loadable from TOML; see
//! `cluster.example.toml`) and the address plan derived from it.

use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use super::error::ClusterError;
use super::local_host::free_port;
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
