//! N real node processes on this machine, started from argument templates: each in its own
//! network namespace when possible (partitions by iptables), otherwise on loopback (where
//! partitions are reported as unsupported). Optionally a fault proxy fronts every node's Raft
//! address and peers are told to use it (link loss and delay), and a fleet of simulated
//! workers runs beside the nodes (never faulted).
//!
//! Process handles sit behind a plain mutex, never held across an await: this is test
//! tooling whose operations are serialised by the nemesis anyway.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use super::contract::{Cluster, Endpoint};
use super::error::ClusterError;
use super::local_config::{LocalClusterConfig, NetworkMode, plan_addresses};
use super::local_host::{create_dir, resolve_program};
use super::node_api::{ClusterLayout, NodeApi, NodeInfo};
use super::template::TemplateVars;
use super::workers::{WorkerFleet, WorkerInfo};
use crate::NodeId;
use crate::nemesis::PartitionPlan;
use crate::nemesis::command::SystemRunner;
use crate::nemesis::netns::{self, NetnsLab};
use crate::nemesis::partition::IptablesPartitioner;
use crate::nemesis::process::{ManagedProcess, ProcessSpec};
use crate::nemesis::proxy::{FaultProxy, LinkFault};
use crate::state::NodeState;

pub struct LocalProcessCluster<A: NodeApi> {
    config: LocalClusterConfig,
    api: A,
    infos: Vec<NodeInfo>,
    processes: Mutex<BTreeMap<NodeId, ManagedProcess>>,
    lab: Option<NetnsLab<SystemRunner>>,
    /// Why partitions cannot be applied, if they cannot.
    partitions: Result<(), String>,
    proxies: Mutex<BTreeMap<NodeId, FaultProxy>>,
    workers: WorkerFleet,
}

impl<A: NodeApi> LocalProcessCluster<A> {
    /// Plans addresses and directories; nothing runs until `start`. In namespace mode this
    /// fails with `Unsupported` (and the reason) when namespaces cannot be created here.
    pub fn new(config: LocalClusterConfig, api: A) -> Result<Self, ClusterError> {
        create_dir(&config.work_dir)?;
        let ids: Vec<NodeId> = (1..=config.nodes).collect();
        let (lab, partitions) = match &config.network {
            NetworkMode::Loopback => (
                None,
                Err("partitions need network namespaces (root, iproute2, iptables)".to_owned()),
            ),
            NetworkMode::Netns { prefix, subnet } => {
                let support = netns::probe(&SystemRunner, prefix);
                if let Err(reason) = support.namespaces {
                    return Err(ClusterError::unsupported("network namespaces", reason));
                }
                let lab = NetnsLab::new(SystemRunner, prefix, *subnet, ids.clone())?;
                (Some(lab), support.iptables)
            }
        };
        let mut infos = Vec::new();
        let mut processes = BTreeMap::new();
        for &id in &ids {
            let (client_addr, raft_addr, advertised_raft_addr) =
                plan_addresses(&config, lab.as_ref(), id)?;
            let dir = config.work_dir.join(format!("n{id}"));
            let data_dir = dir.join("data");
            create_dir(&data_dir)?;
            let log_path = config.work_dir.join(format!("n{id}.log"));
            let spec = ProcessSpec {
                program: resolve_program(&config.template.program),
                args: Vec::new(),
                env: Vec::new(),
                wrapper: lab.as_ref().map(|l| l.exec_prefix(id)).unwrap_or_default(),
                log_path: log_path.clone(),
            };
            processes.insert(id, ManagedProcess::new(spec));
            infos.push(NodeInfo {
                id,
                client_addr,
                raft_addr,
                advertised_raft_addr,
                data_dir,
                dir,
                log_path,
            });
        }
        let worker_host = lab.as_ref().map_or(IpAddr::V4(Ipv4Addr::LOCALHOST), |l| {
            IpAddr::V4(l.bridge_ip())
        });
        let workers = WorkerFleet::plan(
            &config.workers,
            worker_host,
            lab.is_some(),
            &config.work_dir,
        )?;
        Ok(Self {
            config,
            api,
            infos,
            processes: Mutex::new(processes),
            lab,
            partitions,
            proxies: Mutex::new(BTreeMap::new()),
            workers,
        })
    }

    /// Why partitions cannot be applied here (no namespaces, or no usable iptables in one),
    /// if they cannot: a caller that needs them skips before starting the nodes.
    pub fn partition_support(&self) -> Result<(), String> {
        self.partitions.clone()
    }

    /// The simulated workers the nodes route to.
    pub fn workers(&self) -> &[WorkerInfo] {
        self.workers.infos()
    }

    pub fn infos(&self) -> &[NodeInfo] {
        &self.infos
    }

    pub fn lab(&self) -> Option<&NetnsLab<SystemRunner>> {
        self.lab.as_ref()
    }

    fn info(&self, node: NodeId) -> Result<&NodeInfo, ClusterError> {
        self.infos
            .iter()
            .find(|i| i.id == node)
            .ok_or(ClusterError::UnknownNode(node))
    }

    fn vars(&self, info: &NodeInfo) -> TemplateVars {
        TemplateVars::for_node(info, &self.infos, &self.config.secret)
    }

    fn with_process<T>(
        &self,
        node: NodeId,
        action: impl FnOnce(&mut ManagedProcess) -> Result<T, crate::nemesis::process::ProcessError>,
    ) -> Result<T, ClusterError> {
        let mut processes = self.processes.lock();
        let process = processes
            .get_mut(&node)
            .ok_or(ClusterError::UnknownNode(node))?;
        action(process).map_err(|source| ClusterError::Process { node, source })
    }

    fn spawn(&self, node: NodeId) -> Result<(), ClusterError> {
        let info = self.info(node)?;
        let layout = ClusterLayout {
            nodes: &self.infos,
            workers: self.workers.infos(),
            secret: &self.config.secret,
        };
        for (name, content) in self.api.node_files(info, &layout)? {
            let path = info.dir.join(name);
            std::fs::write(&path, content).map_err(|source| ClusterError::Io {
                context: format!("writing {}", path.display()),
                source,
            })?;
        }
        let vars = self.vars(info);
        let env = self.config.template.env(&vars)?;
        let mut processes = self.processes.lock();
        let process = processes
            .get_mut(&node)
            .ok_or(ClusterError::UnknownNode(node))?;
        let args = self
            .config
            .template
            .command_args(&vars, process.starts() == 0)?;
        process.set_args(args);
        process.set_env(env);
        process
            .start()
            .map(|_| ())
            .map_err(|source| ClusterError::Process { node, source })
    }

    fn running(&self, node: NodeId) -> bool {
        self.with_process(node, |p| Ok(p.is_running()))
            .unwrap_or(false)
    }

    async fn wait_ready(&self) -> Result<(), ClusterError> {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(self.config.ready_timeout_ms);
        loop {
            let mut waiting = None;
            for info in &self.infos {
                if !self.running(info.id) {
                    return Err(ClusterError::Node {
                        node: info.id,
                        message: format!("exited during start-up; see {}", info.log_path.display()),
                    });
                }
                if waiting.is_none() && !self.api.ready(info).await {
                    waiting = Some(info);
                }
            }
            let Some(info) = waiting else {
                return Ok(());
            };
            if tokio::time::Instant::now() >= deadline {
                return Err(ClusterError::Node {
                    node: info.id,
                    message: format!(
                        "not ready after {} ms; see {}",
                        self.config.ready_timeout_ms,
                        info.log_path.display()
                    ),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn partitioner(&self) -> Result<IptablesPartitioner<'_, SystemRunner>, ClusterError> {
        let lab = self.lab.as_ref().ok_or_else(|| {
            ClusterError::unsupported(
                "partitions",
                self.partitions.clone().err().unwrap_or_default(),
            )
        })?;
        if let Err(reason) = &self.partitions {
            return Err(ClusterError::unsupported("partitions", reason.clone()));
        }
        let proxies: BTreeMap<NodeId, SocketAddr> = if self.config.link_proxies {
            self.infos
                .iter()
                .map(|i| (i.id, i.advertised_raft_addr))
                .collect()
        } else {
            BTreeMap::new()
        };
        Ok(IptablesPartitioner::new(lab).with_proxies(move |peer| proxies.get(&peer).copied()))
    }

    fn clear_link_faults(&self) {
        for proxy in self.proxies.lock().values() {
            proxy.clear();
        }
    }
}

impl<A: NodeApi> Cluster for LocalProcessCluster<A> {
    fn nodes(&self) -> Vec<NodeId> {
        self.infos.iter().map(|i| i.id).collect()
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        self.infos
            .iter()
            .map(|i| Endpoint {
                node: i.id,
                client_addr: i.client_addr,
            })
            .collect()
    }

    async fn start(&self) -> Result<(), ClusterError> {
        if let Some(lab) = &self.lab {
            lab.setup()?;
        }
        self.workers.start().await?;
        if self.config.link_proxies {
            for info in &self.infos {
                let seed = self.config.seed.wrapping_add(u64::from(info.id));
                let proxy = FaultProxy::start(info.advertised_raft_addr, info.raft_addr, seed)
                    .await
                    .map_err(|source| ClusterError::Io {
                        context: format!("starting the fault proxy of node {}", info.id),
                        source,
                    })?;
                self.proxies.lock().insert(info.id, proxy);
            }
        }
        for info in &self.infos {
            self.spawn(info.id)?;
        }
        self.wait_ready().await
    }

    async fn stop(&self) -> Result<(), ClusterError> {
        let nodes = self.nodes();
        for &node in &nodes {
            let _ = self.with_process(node, |p| p.request_stop());
        }
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(self.config.stop_grace_ms);
        while nodes.iter().any(|&n| self.running(n)) && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for &node in &nodes {
            if self.running(node) {
                tracing::warn!(node, "node ignored SIGTERM; killing it");
                let _ = self.with_process(node, |p| p.kill9());
            }
        }
        let grace = Duration::from_millis(self.config.stop_grace_ms);
        self.workers.stop(grace).await;
        let proxies = std::mem::take(&mut *self.proxies.lock());
        for proxy in proxies.into_values() {
            proxy.shutdown().await;
        }
        if let Some(lab) = &self.lab {
            lab.teardown();
        }
        Ok(())
    }

    async fn start_node(&self, node: NodeId) -> Result<(), ClusterError> {
        self.spawn(node)
    }

    async fn kill(&self, node: NodeId) -> Result<(), ClusterError> {
        self.with_process(node, |p| p.kill9().map(|_| ()))
    }

    async fn pause(&self, node: NodeId) -> Result<(), ClusterError> {
        self.with_process(node, ManagedProcess::pause)
    }

    async fn resume(&self, node: NodeId) -> Result<(), ClusterError> {
        self.with_process(node, ManagedProcess::resume)
    }

    async fn partition(&self, plan: &PartitionPlan) -> Result<(), ClusterError> {
        Ok(self.partitioner()?.apply(plan)?)
    }

    async fn heal_network(&self) -> Result<(), ClusterError> {
        Ok(self.partitioner()?.heal()?)
    }

    async fn set_link_fault(&self, to: NodeId, fault: LinkFault) -> Result<(), ClusterError> {
        match self.proxies.lock().get(&to) {
            Some(proxy) => {
                proxy.set_fault(fault);
                Ok(())
            }
            None => Err(ClusterError::unsupported(
                "link faults",
                "no fault proxy runs for that node (link_proxies is off)",
            )),
        }
    }

    async fn skew_clock(&self, node: NodeId, offset_ms: i64) -> Result<(), ClusterError> {
        self.api.skew_clock(self.info(node)?, offset_ms).await
    }

    async fn leader(&self) -> Result<Option<NodeId>, ClusterError> {
        let mut first_error = None;
        for info in &self.infos {
            if !self.running(info.id) {
                continue;
            }
            match self.api.is_leader(info).await {
                Ok(true) => return Ok(Some(info.id)),
                Ok(false) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        first_error.map_or(Ok(None), Err)
    }

    async fn recover_all(&self) -> Result<(), ClusterError> {
        for node in self.nodes() {
            let paused = self.with_process(node, |p| Ok(p.is_paused() && p.is_running()))?;
            if paused {
                self.resume(node).await?;
            }
            if !self.running(node) {
                self.spawn(node)?;
            }
            match self.skew_clock(node, 0).await {
                Err(e) if !e.is_unsupported() => return Err(e),
                _ => {}
            }
        }
        self.clear_link_faults();
        match self.heal_network().await {
            Err(e) if !e.is_unsupported() => Err(e),
            _ => Ok(()),
        }
    }

    async fn read_final_state(&self, node: NodeId) -> Result<NodeState, ClusterError> {
        self.api.read_state(self.info(node)?).await
    }

    fn node_log(&self, node: NodeId) -> Option<PathBuf> {
        self.info(node).ok().map(|i| i.log_path.clone())
    }
}

impl<A: NodeApi> Drop for LocalProcessCluster<A> {
    fn drop(&mut self) {
        // Processes kill themselves on drop; the namespaces would outlive us.
        self.processes.lock().clear();
        if let Some(lab) = &self.lab {
            lab.teardown();
        }
    }
}
