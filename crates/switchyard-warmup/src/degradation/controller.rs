//! The graded degradation controller. The gateway calls `evaluate` with fresh signals (on
//! its tick); worsening moves one level at a time and may pass through several levels in one
//! call (95 % reaches level 3 via level 2), each level only once all its actions succeeded;
//! recovering improves by one level per `recovery_step_secs` at most. Operators can force
//! (pin) a level and release it; both are audited.

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::Serialize;
use std::sync::Arc;
use tokio::sync::Mutex as AsyncMutex;
use tracing::warn;

use super::actions::{ActionExecutor, DegradationAction, DynActionExecutor};
use super::audit::{AuditEntry, AuditKind, AuditLog};
use super::effects::Effects;
use super::level::{Level, LevelCause};
use super::metrics::DegradationMetrics;
use super::signals::{Signals, level_cause, target_level};
use super::view::{DegradationView, Forced, LevelFailure, ViewReader};
use crate::clock::{UnixMillis, secs_to_ms};
use crate::config::DegradationConfig;
use crate::error::DegradationError;
use switchyard_core::WallClock;

pub(crate) struct ControllerState {
    pub(crate) level: Level,
    /// Why `level` is in force (kept while the recovery interval holds it).
    pub(crate) cause: LevelCause,
    pub(crate) effects: Effects,
    /// When the level last changed.
    pub(crate) since: UnixMillis,
    pub(crate) failed: Option<LevelFailure>,
    pub(crate) forced: Option<Forced>,
    pub(crate) warned: bool,
    pub(crate) signals: Signals,
    pub(crate) target: Level,
}

pub struct DegradationController {
    pub(crate) state: AsyncMutex<ControllerState>,
    pub(crate) view: Arc<ArcSwap<DegradationView>>,
    pub(crate) executor: Arc<dyn DynActionExecutor>,
    pub(crate) clock: WallClock,
    pub(crate) config: ArcSwap<DegradationConfig>,
    pub(crate) metrics: DegradationMetrics,
    pub(crate) audit: Mutex<AuditLog>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ActionReport {
    pub action: DegradationAction,
    pub ok: bool,
    pub error: Option<String>,
    pub took_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepReport {
    pub level: Level,
    /// Every action attempted, in order (none after the first failure).
    pub actions: Vec<ActionReport>,
    /// All actions succeeded and the level is in force.
    pub entered: bool,
}

/// What one `evaluate` did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Evaluation {
    pub from: Level,
    pub to: Level,
    pub target: Level,
    pub steps: Vec<StepReport>,
    /// Could have recovered one level, but the last change is younger than the interval.
    pub recovery_held: bool,
    /// A forced level pins the controller; signals were recorded only.
    pub forced: bool,
}

/// What `force` did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ForceReport {
    pub from: Level,
    pub requested: Level,
    pub reached: Level,
    pub steps: Vec<StepReport>,
    pub ok: bool,
}

/// `GET /admin/degradation`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DegradationStatus {
    pub view: DegradationView,
    pub target: Level,
    pub signals: Signals,
    /// Earliest moment the level may improve by one step.
    pub next_recovery_unix_ms: Option<UnixMillis>,
    pub audit: Vec<AuditEntry>,
}

impl DegradationController {
    /// Validates the config and registers the `switchyard_degradation_*` metrics. Starts at
    /// level 0 without running any action (the gateway starts undegraded).
    pub fn new<E: ActionExecutor>(
        config: DegradationConfig,
        executor: Arc<E>,
        clock: WallClock,
        registry: &prometheus::Registry,
    ) -> Result<Self, DegradationError> {
        let view = ViewReader::undegraded(&clock);
        Self::publishing_to(config, executor, clock, registry, view)
    }

    /// [`Self::new`] publishing to `view`, a reader made before the controller (with
    /// [`ViewReader::undegraded`]) so that what the controller's actions depend on can read
    /// the level too.
    pub fn publishing_to<E: ActionExecutor>(
        config: DegradationConfig,
        executor: Arc<E>,
        clock: WallClock,
        registry: &prometheus::Registry,
        view: ViewReader,
    ) -> Result<Self, DegradationError> {
        config.validate()?;
        let metrics = DegradationMetrics::new(registry)?;
        let now = clock.unix_millis();
        Ok(Self {
            state: AsyncMutex::new(ControllerState {
                level: Level::Normal,
                cause: LevelCause::None,
                effects: Effects::default(),
                since: now,
                failed: None,
                forced: None,
                warned: false,
                signals: Signals::default(),
                target: Level::Normal,
            }),
            view: view.0,
            executor,
            clock,
            audit: Mutex::new(AuditLog::new(config.audit_capacity)),
            config: ArcSwap::from_pointee(config),
            metrics,
        })
    }

    /// The hot-path reader: `reader.load().allows(&tags)`.
    pub fn view(&self) -> ViewReader {
        ViewReader(Arc::clone(&self.view))
    }

    /// Swaps thresholds and level parameters; the new values apply from the next step.
    pub fn reload(&self, config: DegradationConfig) -> Result<(), DegradationError> {
        config.validate()?;
        self.config.store(Arc::new(config));
        Ok(())
    }

    pub fn config(&self) -> Arc<DegradationConfig> {
        self.config.load_full()
    }

    /// Feeds fresh signals; moves the level as the rules allow.
    pub async fn evaluate(&self, signals: Signals) -> Evaluation {
        let config = self.config.load_full();
        let mut state = self.state.lock().await;
        let now = self.clock.unix_millis();
        state.signals = signals;
        self.record_water(&mut state, &signals, &config);
        let target = target_level(&signals, &config);
        state.target = target;
        self.metrics.target_level.set(i64::from(target.as_u8()));
        let mut evaluation = Evaluation {
            from: state.level,
            to: state.level,
            target,
            steps: Vec::new(),
            recovery_held: false,
            forced: state.forced.is_some(),
        };
        if state.forced.is_some() || !config.enabled {
            return evaluation;
        }
        // A failure that no longer lies on the way to the target is history, not state (a
        // failed re-application of the level in force is `follow_cause`'s to judge).
        if state.failed.as_ref().is_some_and(|f| {
            f.level != state.level && state.level.step_toward(target) != Some(f.level)
        }) {
            state.failed = None;
            self.publish(&state);
        }
        let failed_retry = secs_to_ms(config.failed_retry_secs);
        let recently_failed = |state: &ControllerState, next: Level| {
            state
                .failed
                .as_ref()
                .is_some_and(|f| f.level == next && now.saturating_sub(f.at_unix_ms) < failed_retry)
        };
        // The cause of a level no signal calls for (one held by the recovery interval, or
        // one on the way down) stays what it was when a signal last called for it.
        let cause_of = |state: &ControllerState, level: Level| {
            level_cause(level, &signals, &config).unwrap_or(state.cause)
        };
        if target > state.level {
            while let Some(next) = state.level.step_toward(target) {
                if recently_failed(&state, next) {
                    break;
                }
                let cause = cause_of(&state, next);
                let step = self.enter(&mut state, next, "signal", cause).await;
                let entered = step.entered;
                evaluation.steps.push(step);
                if !entered {
                    break;
                }
            }
        } else if let Some(next) = state.level.step_toward(target) {
            if now.saturating_sub(state.since) < secs_to_ms(config.recovery_step_secs) {
                evaluation.recovery_held = true;
                self.metrics.recovery_held.inc();
            } else if !recently_failed(&state, next) {
                let cause = cause_of(&state, next);
                let step = self.enter(&mut state, next, "signal", cause).await;
                evaluation.steps.push(step);
            }
        }
        if evaluation.steps.is_empty() {
            let cause = cause_of(&state, state.level);
            self.follow_cause(&mut state, cause, &config, &mut evaluation)
                .await;
        }
        evaluation.to = state.level;
        evaluation
    }

    /// The level in force stays, but what calls for it changed (overload ended and the
    /// budget water level now calls for it, or the other way round): when that changes
    /// its effects (the concurrency cut), re-apply the level, must-succeed as ever.
    async fn follow_cause(
        &self,
        state: &mut ControllerState,
        cause: LevelCause,
        config: &DegradationConfig,
        evaluation: &mut Evaluation,
    ) {
        let level = state.level;
        let reapply_failed = state.failed.as_ref().filter(|f| f.level == level);
        if cause == state.cause {
            if reapply_failed.is_some() {
                // The re-application that failed is no longer wanted.
                state.failed = None;
                self.publish(state);
            }
            return;
        }
        if Effects::caused(level, cause, config) == Effects::caused(level, state.cause, config) {
            state.cause = cause;
            self.publish(state);
            return;
        }
        let retry_after = secs_to_ms(config.failed_retry_secs);
        let now = self.clock.unix_millis();
        if reapply_failed.is_some_and(|f| now.saturating_sub(f.at_unix_ms) < retry_after) {
            return;
        }
        let step = self.enter(state, level, "cause_change", cause).await;
        evaluation.steps.push(step);
    }

    /// Pins `level` until [`Self::release`]: steps there one level at a time (no recovery
    /// interval: an operator decided), then ignores signals. Audited.
    pub async fn force(
        &self,
        level: Level,
        by: &str,
        reason: &str,
    ) -> Result<ForceReport, DegradationError> {
        if by.trim().is_empty() {
            return Err(DegradationError::Anonymous("forced level"));
        }
        let mut state = self.state.lock().await;
        let from = state.level;
        let mut steps = Vec::new();
        while let Some(next) = state.level.step_toward(level) {
            let step = self
                .enter(&mut state, next, "force", LevelCause::Operator)
                .await;
            let entered = step.entered;
            steps.push(step);
            if !entered {
                break;
            }
        }
        // Forcing the level already in force for the overload alone adds its concurrency cut.
        if steps.is_empty() && level != Level::Normal && state.cause != LevelCause::Operator {
            let config = self.config.load_full();
            if Effects::caused(level, state.cause, &config) == Effects::of(level, &config) {
                state.cause = LevelCause::Operator;
            } else {
                let step = self
                    .enter(&mut state, level, "force", LevelCause::Operator)
                    .await;
                steps.push(step);
            }
        }
        let ok = state.level == level && steps.iter().all(|step| step.entered);
        let now = self.clock.unix_millis();
        state.forced = Some(Forced {
            level,
            by: by.to_string(),
            reason: reason.to_string(),
            at_unix_ms: now,
        });
        self.publish(&state);
        self.metrics.overrides.with_label_values(&["force"]).inc();
        self.record_audit(AuditKind::Force, by, from, level, reason, ok);
        Ok(ForceReport {
            from,
            requested: level,
            reached: state.level,
            steps,
            ok,
        })
    }

    /// Un-pins a forced level; the next `evaluate` follows the signals again (recovering
    /// one level per interval). Audited.
    pub async fn release(&self, by: &str, reason: &str) -> Result<bool, DegradationError> {
        if by.trim().is_empty() {
            return Err(DegradationError::Anonymous("release"));
        }
        let mut state = self.state.lock().await;
        let Some(forced) = state.forced.take() else {
            return Ok(false);
        };
        self.publish(&state);
        self.metrics.overrides.with_label_values(&["release"]).inc();
        self.record_audit(
            AuditKind::Release,
            by,
            forced.level,
            state.level,
            reason,
            true,
        );
        Ok(true)
    }

    pub async fn status(&self) -> DegradationStatus {
        let config = self.config.load();
        let state = self.state.lock().await;
        let next_recovery = (state.target < state.level && state.forced.is_none()).then(|| {
            state
                .since
                .saturating_add(secs_to_ms(config.recovery_step_secs))
        });
        DegradationStatus {
            view: (**self.view.load()).clone(),
            target: state.target,
            signals: state.signals,
            next_recovery_unix_ms: next_recovery,
            audit: self.audit.lock().entries(),
        }
    }

    pub fn audit(&self) -> Vec<AuditEntry> {
        self.audit.lock().entries()
    }

    fn record_water(
        &self,
        state: &mut ControllerState,
        signals: &Signals,
        config: &DegradationConfig,
    ) {
        let Some(water) = signals.water_level else {
            return;
        };
        self.metrics.water_level.set(water);
        let above = water >= config.warn_at;
        if above && !state.warned {
            self.metrics.water_warnings.inc();
            warn!(
                water_level = water,
                warn_at = config.warn_at,
                "budget water level crossed the warn threshold (recorded only)"
            );
        }
        state.warned = above;
    }

    pub(crate) fn publish(&self, state: &ControllerState) {
        self.metrics.level.set(i64::from(state.level.as_u8()));
        self.view.store(Arc::new(DegradationView {
            level: state.level,
            cause: state.cause,
            since_unix_ms: state.since,
            effects: state.effects,
            failed: state.failed.clone(),
            forced: state.forced.clone(),
        }));
    }

    pub(crate) fn record_audit(
        &self,
        kind: AuditKind,
        by: &str,
        from: Level,
        to: Level,
        reason: &str,
        ok: bool,
    ) {
        self.audit.lock().record(AuditEntry {
            at_unix_ms: self.clock.unix_millis(),
            kind,
            by: by.to_string(),
            from,
            to,
            reason: reason.to_string(),
            ok,
        });
    }
}
