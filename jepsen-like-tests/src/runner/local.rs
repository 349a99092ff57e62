//! `--cluster local`: real `switchyard serve` replicas and simulated workers as processes on
//! this machine, from a cluster file (see `cluster.example.toml`), in network namespaces when
//! this process may create them and on loopback otherwise (partitions are then recorded as
//! skipped, with the reason).

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::config::RunConfig;
use crate::cluster::{ClusterError, LocalClusterConfig, LocalProcessCluster, NetworkMode};
use crate::switchyard::{
    Credentials, SwitchyardNodeApi, SwitchyardSettings, SwitchyardTransport, check_config,
};
use crate::workload::{MixConfig, QuotaMix, QuotaWorkload};

#[derive(Debug, thiserror::Error)]
pub enum LocalSetupError {
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}

#[derive(Debug, Default, Deserialize)]
struct SettingsSection {
    #[serde(default)]
    switchyard: SwitchyardSettings,
}

/// A cluster file: the process cluster and the `[switchyard]` settings.
#[derive(Clone, Debug)]
pub struct LocalClusterFile {
    pub cluster: LocalClusterConfig,
    pub switchyard: SwitchyardSettings,
}

impl LocalClusterFile {
    pub fn parse(text: &str) -> Result<Self, String> {
        let cluster: LocalClusterConfig = toml::from_str(text).map_err(|e| e.to_string())?;
        let settings: SettingsSection = toml::from_str(text).map_err(|e| e.to_string())?;
        Ok(Self {
            cluster,
            switchyard: settings.switchyard,
        })
    }

    pub fn load(path: &Path) -> Result<Self, LocalSetupError> {
        let file_error = |message: String| LocalSetupError::File {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| file_error(e.to_string()))?;
        Self::parse(&text).map_err(file_error)
    }
}

/// Everything a run against local processes needs.
pub struct LocalRun {
    pub cluster: LocalProcessCluster<SwitchyardNodeApi>,
    pub workload: QuotaWorkload<SwitchyardTransport>,
    pub config: RunConfig,
    /// Why namespaces were not used, when they were asked for and could not be.
    pub fell_back: Option<String>,
}

/// Plans the cluster (nothing starts until the run) and the workload over it. The mix's
/// worker names are replaced by the fleet's, so affinity records name real workers.
pub fn prepare(
    file: LocalClusterFile,
    nodes: u32,
    seed: u64,
    work_dir: PathBuf,
    mut mix: MixConfig,
    mut config: RunConfig,
) -> Result<LocalRun, LocalSetupError> {
    let mut local = file.cluster;
    local.nodes = nodes;
    local.work_dir = work_dir;
    local.seed = seed;
    if local.workers.count > 0 && !local.workers.program.is_empty() {
        mix.workers = (1..=local.workers.count)
            .map(|i| format!("{}{i}", local.workers.name_prefix))
            .collect();
    }
    let credentials = Arc::new(Credentials::for_mix(&mix));
    let quota_mix = QuotaMix::new(mix);
    let budgets = quota_mix.budgets();
    let api = || {
        SwitchyardNodeApi::new(
            credentials.clone(),
            file.switchyard.clone(),
            budgets.clone(),
        )
    };
    let mut fell_back = None;
    let cluster = match LocalProcessCluster::new(local.clone(), api()?) {
        Err(ClusterError::Unsupported { what, reason })
            if local.network != NetworkMode::Loopback =>
        {
            let why = format!("{what}: {reason}");
            tracing::warn!(%why, "falling back to loopback (partitions will be skipped)");
            fell_back = Some(why);
            local.network = NetworkMode::Loopback;
            LocalProcessCluster::new(local, api()?)?
        }
        other => other?,
    };
    // Past the promised timeout plus grace, so a hang is seen (and flagged) as one, but
    // before the runner abandons the request.
    let timeout = config.check.request_timeout + config.check.hang_grace * 3 / 2;
    let transport = SwitchyardTransport::new(credentials, file.switchyard.model.clone(), timeout);
    config.check = check_config(config.check);
    Ok(LocalRun {
        cluster,
        workload: QuotaWorkload::new(quota_mix, transport),
        config,
        fell_back,
    })
}
