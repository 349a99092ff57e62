//! The results folder of a run: `<base>/<unix time>-seed<seed>/` holding the history (JSON
//! lines, written live), the schedule, the faults applied, the final states, the check
//! configuration, the verdicts, the text report, and (for process clusters) `nodes/` with
//! each node's log and data. [`recheck`] judges a folder again, offline.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::outcome::RunOutcome;
use crate::checker::{CheckConfig, Verdict, check_all};
use crate::history::read_history;
use crate::state::FinalStates;

pub const HISTORY_FILE: &str = "history.jsonl";
pub const SCHEDULE_FILE: &str = "schedule.json";
pub const FAULTS_FILE: &str = "faults.json";
pub const FINAL_STATE_FILE: &str = "final-state.json";
pub const CHECK_CONFIG_FILE: &str = "check-config.json";
pub const VERDICTS_FILE: &str = "verdicts.json";
pub const REPORT_FILE: &str = "report.txt";
/// Node logs and data directories of process clusters.
pub const NODES_DIR: &str = "nodes";

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> ResultsError + '_ {
    move |source| ResultsError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates a fresh folder for a run under `base`.
pub fn create_run_dir(base: &Path, seed: u64) -> Result<PathBuf, ResultsError> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut attempt = 0u32;
    loop {
        let name = match attempt {
            0 => format!("{stamp}-seed{seed}"),
            n => format!("{stamp}-seed{seed}-{n}"),
        };
        let dir = base.join(name);
        if !dir.exists() {
            std::fs::create_dir_all(&dir).map_err(io_error(&dir))?;
            return Ok(dir);
        }
        attempt += 1;
    }
}

fn write_json(dir: &Path, name: &str, value: &impl Serialize) -> Result<(), ResultsError> {
    let path = dir.join(name);
    let text = serde_json::to_string_pretty(value).map_err(|source| ResultsError::Json {
        path: path.clone(),
        source,
    })?;
    std::fs::write(&path, text).map_err(io_error(&path))
}

fn read_json<T: DeserializeOwned>(dir: &Path, name: &str) -> Result<T, ResultsError> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path).map_err(io_error(&path))?;
    serde_json::from_str(&text).map_err(|source| ResultsError::Json { path, source })
}

/// Everything but the history (already written as it happened).
pub fn write_artifacts(dir: &Path, outcome: &RunOutcome) -> Result<(), ResultsError> {
    write_json(dir, SCHEDULE_FILE, &outcome.schedule)?;
    write_json(dir, FAULTS_FILE, &outcome.faults)?;
    write_json(dir, FINAL_STATE_FILE, &outcome.final_states)?;
    write_json(dir, CHECK_CONFIG_FILE, &outcome.config.check)?;
    write_json(dir, VERDICTS_FILE, &outcome.verdicts)?;
    let report = super::report::render(outcome);
    let path = dir.join(REPORT_FILE);
    std::fs::write(&path, report).map_err(io_error(&path))
}

/// Runs every checker again on a results folder.
pub fn recheck(dir: &Path) -> Result<Vec<Verdict>, ResultsError> {
    recheck_with(dir, |_| {})
}

/// Runs every checker again on a results folder, with the recorded configuration adjusted
/// by `adjust` (e.g. a longer linearizability search than the run could afford).
pub fn recheck_with(
    dir: &Path,
    adjust: impl FnOnce(&mut CheckConfig),
) -> Result<Vec<Verdict>, ResultsError> {
    let history = read_history(dir.join(HISTORY_FILE))?;
    let final_states: FinalStates = read_json(dir, FINAL_STATE_FILE)?;
    let mut config: CheckConfig = read_json(dir, CHECK_CONFIG_FILE)?;
    adjust(&mut config);
    Ok(check_all(&history, &final_states, &config))
}
