//! The `[switchyard]` section of the cluster file ([`SwitchyardSettings`]).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[switchyard]` in the cluster file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SwitchyardSettings {
    /// The model the simulated workers serve and the workload asks for.
    pub model: String,
    /// Routing policy when the base config names none (`cache_aware` applies affinity).
    pub routing_policy: String,
    /// An operator config to start from; the suite overrides cluster, admin keys, tenants
    /// and workers in it.
    pub base_config: Option<PathBuf>,
}

impl Default for SwitchyardSettings {
    fn default() -> Self {
        Self {
            model: "sim-llama".into(),
            routing_policy: "cache_aware".into(),
            base_config: None,
        }
    }
}
