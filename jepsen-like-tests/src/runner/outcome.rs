//! What a run produces ([`RunOutcome`]) or why it could not ([`RunError`]). Kept apart from
//! the module root so the report, the results folder and the summary read outcomes without
//! depending on the code that runs them.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

use super::config::RunConfig;
use super::nemesis_driver::AppliedFault;
use crate::NodeId;
use crate::checker::{Validity, Verdict, WindowStats};
use crate::cluster::ClusterError;
use crate::history::{History, HistoryError};
use crate::nemesis::Schedule;
use crate::state::FinalStates;
use crate::workload::WorkloadError;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("cluster: {0}")]
    Cluster(#[from] ClusterError),
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    History(#[from] HistoryError),
}

/// Everything a run produced.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOutcome {
    pub nodes: Vec<NodeId>,
    pub config: RunConfig,
    pub schedule: Schedule,
    pub faults: Vec<AppliedFault>,
    pub history: History,
    pub final_states: FinalStates,
    pub availability: BTreeMap<String, WindowStats>,
    pub verdicts: Vec<Verdict>,
    pub node_logs: BTreeMap<NodeId, PathBuf>,
}

impl RunOutcome {
    /// No checker found a violation.
    pub fn passed(&self) -> bool {
        self.verdicts
            .iter()
            .all(|v| v.validity != Validity::Invalid)
    }

    pub fn verdict(&self, checker: &str) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.checker == checker)
    }
}
