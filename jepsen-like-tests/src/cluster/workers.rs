//! The simulated inference workers a local cluster's nodes route to: plain processes that no
//! nemesis touches, started before the nodes and stopped after them. In namespace mode they
//! listen on the bridge address (every node namespace reaches it), otherwise on loopback.

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::ClusterError;
use super::local_host::{free_port, resolve_program};
use super::template::{TemplateError, render_with};
use crate::nemesis::process::{ManagedProcess, ProcessSpec};

/// How to run the workers (`[workers]` in the cluster file). No program: no workers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerFleetConfig {
    pub program: String,
    pub count: u32,
    /// Placeholders: `{name}`, `{host}`, `{port}`, `{index}` (from 1).
    pub args: Vec<String>,
    pub name_prefix: String,
    /// Namespace mode: worker `i` listens on the bridge address, port `base_port + i`.
    pub base_port: u16,
    pub ready_timeout_ms: u64,
}

impl Default for WorkerFleetConfig {
    fn default() -> Self {
        Self {
            program: String::new(),
            count: 0,
            args: Vec::new(),
            name_prefix: "sim-".into(),
            base_port: 19_000,
            ready_timeout_ms: 15_000,
        }
    }
}

/// One worker as the nodes' configuration names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    pub name: String,
    pub addr: SocketAddr,
    pub log_path: PathBuf,
}

impl WorkerInfo {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

pub(crate) struct WorkerFleet {
    infos: Vec<WorkerInfo>,
    processes: Mutex<Vec<ManagedProcess>>,
    ready_timeout: Duration,
}

impl WorkerFleet {
    /// Plans names, addresses and command lines; nothing runs until `start`.
    pub fn plan(
        config: &WorkerFleetConfig,
        host: IpAddr,
        namespaces: bool,
        work_dir: &Path,
    ) -> Result<Self, ClusterError> {
        let mut infos = Vec::new();
        let mut processes = Vec::new();
        let count = if config.program.is_empty() {
            0
        } else {
            config.count
        };
        for index in 1..=count {
            let port = if namespaces {
                config.base_port.saturating_add(index as u16)
            } else {
                free_port(host)?
            };
            let name = format!("{}{index}", config.name_prefix);
            let log_path = work_dir.join(format!("{name}.log"));
            let lookup = |key: &str| match key {
                "name" => Some(name.clone()),
                "host" => Some(host.to_string()),
                "port" => Some(port.to_string()),
                "index" => Some(index.to_string()),
                _ => None,
            };
            let args = config
                .args
                .iter()
                .map(|arg| render_with(arg, lookup))
                .collect::<Result<Vec<_>, TemplateError>>()?;
            processes.push(ManagedProcess::new(ProcessSpec {
                program: resolve_program(&config.program),
                args,
                env: Vec::new(),
                wrapper: Vec::new(),
                log_path: log_path.clone(),
            }));
            infos.push(WorkerInfo {
                name,
                addr: SocketAddr::new(host, port),
                log_path,
            });
        }
        Ok(Self {
            infos,
            processes: Mutex::new(processes),
            ready_timeout: Duration::from_millis(config.ready_timeout_ms),
        })
    }

    pub fn infos(&self) -> &[WorkerInfo] {
        &self.infos
    }

    /// Starts every worker and waits until each accepts connections.
    pub async fn start(&self) -> Result<(), ClusterError> {
        for (process, info) in self.processes.lock().iter_mut().zip(&self.infos) {
            if !process.is_running() {
                process.start().map_err(|source| ClusterError::Worker {
                    name: info.name.clone(),
                    message: source.to_string(),
                })?;
            }
        }
        let deadline = tokio::time::Instant::now() + self.ready_timeout;
        for info in &self.infos {
            loop {
                let connect = tokio::net::TcpStream::connect(info.addr);
                if let Ok(Ok(_)) = tokio::time::timeout(Duration::from_millis(300), connect).await {
                    break;
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(ClusterError::Worker {
                        name: info.name.clone(),
                        message: format!(
                            "not listening on {}; see {}",
                            info.addr,
                            info.log_path.display()
                        ),
                    });
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Ok(())
    }

    /// SIGTERM, then kill -9 whatever is still running after `grace`.
    pub async fn stop(&self, grace: Duration) {
        for process in self.processes.lock().iter_mut() {
            let _ = process.request_stop();
        }
        let deadline = tokio::time::Instant::now() + grace;
        while self.processes.lock().iter_mut().any(|p| p.is_running())
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        for process in self.processes.lock().iter_mut() {
            if process.is_running() {
                let _ = process.kill9();
            }
        }
    }
}
