//! A campaign's table: one Markdown row per kept run (seed, faults applied per kind,
//! availability per fault kind, each checker's verdict), for `RESULTS.md`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::nemesis_driver::{AppliedFault, FaultOutcome};
use super::results::{self, ResultsError};
use crate::checker::{CheckConfig, Validity, Verdict, WindowStats, availability_by_fault};
use crate::history::read_history;
use crate::nemesis::Schedule;

/// One run, summarised.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSummary {
    pub name: String,
    pub seed: u64,
    /// Applied windows per fault kind (the final heal excluded).
    pub applied: BTreeMap<String, usize>,
    /// Skipped or failed windows per fault kind.
    pub not_applied: BTreeMap<String, usize>,
    /// Outcomes per fault kind (`none` = outside fault windows).
    pub availability: BTreeMap<String, WindowStats>,
    pub verdicts: Vec<(String, Validity)>,
}

impl RunSummary {
    pub fn passed(&self) -> bool {
        self.verdicts.iter().all(|(_, v)| *v != Validity::Invalid)
    }
}

fn read_json<T: serde::de::DeserializeOwned>(dir: &Path, name: &str) -> Result<T, ResultsError> {
    let path = dir.join(name);
    let text = std::fs::read_to_string(&path).map_err(|source| ResultsError::Io {
        path: path.clone(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| ResultsError::Json { path, source })
}

pub fn summarize(dir: &Path) -> Result<RunSummary, ResultsError> {
    let schedule: Schedule = read_json(dir, results::SCHEDULE_FILE)?;
    let faults: Vec<AppliedFault> = read_json(dir, results::FAULTS_FILE)?;
    let verdicts: Vec<Verdict> = read_json(dir, results::VERDICTS_FILE)?;
    let config: CheckConfig = read_json(dir, results::CHECK_CONFIG_FILE)?;
    let history = read_history(dir.join(results::HISTORY_FILE))?;
    let ops = history.operations()?;
    let mut applied = BTreeMap::new();
    let mut not_applied = BTreeMap::new();
    for fault in faults.iter().filter(|f| f.window != Schedule::HEAL_WINDOW) {
        let bucket = match fault.outcome {
            FaultOutcome::Applied => &mut applied,
            _ => &mut not_applied,
        };
        *bucket.entry(fault.kind.clone()).or_insert(0) += 1;
    }
    let availability = availability_by_fault(&history, &ops, &config);
    Ok(RunSummary {
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        seed: schedule.seed,
        applied,
        not_applied,
        availability,
        verdicts: verdicts
            .into_iter()
            .map(|v| (v.checker, v.validity))
            .collect(),
    })
}

fn counts(map: &BTreeMap<String, usize>) -> String {
    if map.is_empty() {
        return "–".into();
    }
    map.iter()
        .map(|(kind, n)| format!("{kind}×{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `ok / answered` shares of one kind's operations.
fn shares(stats: Option<&WindowStats>) -> String {
    match stats {
        Some(s) if s.total > 0 => format!(
            "{:.0}% / {:.0}% ({})",
            s.ok_share() * 100.0,
            s.answered_share() * 100.0,
            s.total
        ),
        _ => "–".into(),
    }
}

fn mark(validity: Validity) -> &'static str {
    match validity {
        Validity::Valid => "✓",
        Validity::Invalid => "✗",
        Validity::Unknown => "?",
    }
}

/// The Markdown table of `runs`, with a legend of the checker columns.
pub fn render_table(runs: &[RunSummary]) -> String {
    let kinds: Vec<String> = {
        let mut all: Vec<String> = runs
            .iter()
            .flat_map(|r| r.availability.keys().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    };
    let checkers: Vec<String> = runs
        .first()
        .map(|r| r.verdicts.iter().map(|(c, _)| c.clone()).collect())
        .unwrap_or_default();
    let mut out = String::new();
    let _ = write!(out, "| seed | faults applied | skipped |");
    for kind in &kinds {
        let _ = write!(out, " {kind}: ok / answered (ops) |");
    }
    for (i, _) in checkers.iter().enumerate() {
        let _ = write!(out, " c{} |", i + 1);
    }
    let _ = writeln!(out);
    let columns = 3 + kinds.len() + checkers.len();
    let _ = writeln!(out, "|{}", "---|".repeat(columns));
    for run in runs {
        let _ = write!(
            out,
            "| {} | {} | {} |",
            run.seed,
            counts(&run.applied),
            counts(&run.not_applied)
        );
        for kind in &kinds {
            let _ = write!(out, " {} |", shares(run.availability.get(kind)));
        }
        for checker in &checkers {
            let validity = run
                .verdicts
                .iter()
                .find(|(c, _)| c == checker)
                .map_or("–", |(_, v)| mark(*v));
            let _ = write!(out, " {validity} |");
        }
        let _ = writeln!(out);
    }
    let mut totals: BTreeMap<&str, WindowStats> = BTreeMap::new();
    for run in runs {
        for (kind, stats) in &run.availability {
            let total = totals.entry(kind).or_default();
            total.windows += stats.windows;
            total.total += stats.total;
            total.ok += stats.ok;
            total.refused += stats.refused;
            total.unavailable += stats.unavailable;
            total.unknown += stats.unknown;
        }
    }
    let _ = write!(out, "| all {} runs | | |", runs.len());
    for kind in &kinds {
        let _ = write!(out, " {} |", shares(totals.get(kind.as_str())));
    }
    let passed = |checker: &String| {
        runs.iter()
            .filter(|r| {
                r.verdicts
                    .iter()
                    .any(|(c, v)| c == checker && *v != Validity::Invalid)
            })
            .count()
    };
    for checker in &checkers {
        let _ = write!(out, " {}/{} |", passed(checker), runs.len());
    }
    let _ = writeln!(out);
    let legend: Vec<String> = checkers
        .iter()
        .enumerate()
        .map(|(i, c)| format!("c{} = {c}", i + 1))
        .collect();
    let _ = writeln!(
        out,
        "\n{} (✓ valid, ✗ invalid, ? unknown)",
        legend.join(", ")
    );
    out
}
