//! Drills (a level never exercised fails when it is needed): run a level on demand, through the same detection and action
//! path as a real incident, report every action's result, how long detection and entry
//! took, and whether the gateway recovered to its previous level without a restart.
//! Recovery in a drill skips the recovery interval: the drill tests that recovery works.

use serde::Serialize;

use super::audit::AuditKind;
use super::controller::{DegradationController, StepReport};
use super::level::{Level, LevelCause};
use super::signals::{synthetic_signals, target_level};
use crate::clock::UnixMillis;
use crate::error::DegradationError;

/// Seed 003: the trigger must be recognised within 30 s.
pub const DETECT_DEADLINE_MS: u64 = 30_000;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DrillReport {
    pub level: Level,
    pub by: String,
    pub started_unix_ms: UnixMillis,
    pub previous_level: Level,
    /// Time from injecting the level's signal until the controller chose the level (None:
    /// no signal reaches this level under the config). A level entered only on the way to a
    /// worse one (level 2 with overload_level 1) counts as detected by that signal.
    /// Excludes the gateway's evaluation interval, which adds to it in a real incident.
    pub detected_in_ms: Option<u64>,
    pub detected_in_time: bool,
    pub steps: Vec<StepReport>,
    pub reached: bool,
    pub reached_in_ms: u64,
    pub recovery: Vec<StepReport>,
    pub recovered: bool,
    pub recovery_took_ms: u64,
    /// Reached, every action succeeded, recovered without restart, detected in time.
    pub passed: bool,
}

impl DegradationController {
    /// Runs `level` now and recovers. Refused while a level is forced (the drill would
    /// undo the operator's pin).
    pub async fn drill(&self, level: Level, by: &str) -> Result<DrillReport, DegradationError> {
        if by.trim().is_empty() {
            return Err(DegradationError::Anonymous("drill"));
        }
        let config = self.config.load_full();
        let mut state = self.state.lock().await;
        if state.forced.is_some() {
            return Err(DegradationError::Forced);
        }
        let previous = state.level;
        let started = self.clock.instant();
        let started_unix_ms = self.clock.unix_millis();
        // Detection runs the production mapping (thresholds → level) on injected signals.
        let detected_in_ms = synthetic_signals(level, &config)
            .map(|signals| target_level(&signals, &config))
            .filter(|&chosen| chosen >= level)
            .map(|_| elapsed_ms(started, self.clock.instant()));
        let mut steps = Vec::new();
        while let Some(next) = state.level.step_toward(level) {
            let step = self
                .enter(&mut state, next, "drill", LevelCause::Operator)
                .await;
            let entered = step.entered;
            steps.push(step);
            if !entered {
                break;
            }
        }
        let reached = state.level == level;
        let reached_in_ms = elapsed_ms(started, self.clock.instant());
        let recovery_started = self.clock.instant();
        let mut recovery = Vec::new();
        while let Some(next) = state.level.step_toward(previous) {
            let step = self
                .enter(&mut state, next, "drill", LevelCause::Operator)
                .await;
            let entered = step.entered;
            recovery.push(step);
            if !entered {
                break;
            }
        }
        let recovered = state.level == previous && state.failed.is_none();
        let recovery_took_ms = elapsed_ms(recovery_started, self.clock.instant());
        let detected_in_time = detected_in_ms.is_some_and(|ms| ms <= DETECT_DEADLINE_MS);
        let passed = reached && recovered && detected_in_time;
        drop(state);
        self.metrics
            .drills
            .with_label_values(&[if passed { "passed" } else { "failed" }])
            .inc();
        let reason = format!(
            "drill of level {level}: reached={reached} recovered={recovered} \
             detected_in_ms={detected_in_ms:?}"
        );
        self.record_audit(AuditKind::Drill, by, previous, level, &reason, passed);
        Ok(DrillReport {
            level,
            by: by.to_string(),
            started_unix_ms,
            previous_level: previous,
            detected_in_ms,
            detected_in_time,
            steps,
            reached,
            reached_in_ms,
            recovery,
            recovered,
            recovery_took_ms,
            passed,
        })
    }
}

fn elapsed_ms(from: std::time::Instant, to: std::time::Instant) -> u64 {
    u64::try_from(to.saturating_duration_since(from).as_millis()).unwrap_or(u64::MAX)
}
