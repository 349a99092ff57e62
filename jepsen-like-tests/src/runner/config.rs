//! What a run is asked to do ([`RunConfig`]).

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::Duration;

use crate::NodeId;
use crate::checker::CheckConfig;
use crate::nemesis::{NemesisKind, ScheduleConfig};

/// Overrides of the schedule's defaults (see [`ScheduleConfig::new`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScheduleOverrides {
    pub quiet_start: Option<Duration>,
    pub gap: Option<(Duration, Duration)>,
    pub window: Option<(Duration, Duration)>,
    pub recovery: Option<Duration>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunConfig {
    pub duration: Duration,
    pub seed: u64,
    pub nemeses: Vec<NemesisKind>,
    /// Concurrent clients; each rotates over the replicas.
    pub clients: usize,
    /// Pause between two operations of one client.
    pub think_time: Duration,
    pub schedule: ScheduleOverrides,
    /// Where the history and artifacts go (created by the caller); none: memory only.
    pub results_dir: Option<PathBuf>,
    pub check: CheckConfig,
    /// Pause between rounds of final reads while waiting for agreement.
    pub final_read_interval: Duration,
}

impl RunConfig {
    pub fn new(duration: Duration, seed: u64, nemeses: Vec<NemesisKind>) -> Self {
        Self {
            duration,
            seed,
            nemeses,
            clients: 10,
            think_time: Duration::from_millis(20),
            schedule: ScheduleOverrides::default(),
            results_dir: None,
            check: CheckConfig::default(),
            final_read_interval: Duration::from_millis(500),
        }
    }

    pub fn schedule_config(&self, nodes: Vec<NodeId>) -> ScheduleConfig {
        let mut config = ScheduleConfig::new(nodes, self.duration, self.nemeses.clone());
        let o = &self.schedule;
        config.quiet_start = o.quiet_start.unwrap_or(config.quiet_start);
        config.gap = o.gap.unwrap_or(config.gap);
        config.window = o.window.unwrap_or(config.window);
        config.recovery = o.recovery.unwrap_or(config.recovery);
        config
    }

    /// How long a client waits before abandoning a request: past the promised timeout plus
    /// twice the grace, so a late answer is still seen (and flagged) rather than cut off.
    pub fn abandon_after(&self) -> Duration {
        self.check.request_timeout + self.check.hang_grace * 2
    }
}
