//! The cluster under test, as the runner and nemesis see it.

mod contract;
mod error;
mod local_config;
mod local_host;
mod local_process;
mod node_api;
mod template;
mod workers;

pub use contract::{Cluster, Endpoint};
pub use error::ClusterError;
pub use local_config::{LocalClusterConfig, NetworkMode};
pub use local_process::LocalProcessCluster;
pub use node_api::{ClusterLayout, NodeApi, NodeInfo, UnwiredNodeApi};
pub use template::{NodeTemplate, TemplateError, TemplateVars, render_with};
pub use workers::{WorkerFleetConfig, WorkerInfo};
