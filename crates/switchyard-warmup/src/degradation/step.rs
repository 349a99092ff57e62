//! Entering one level: every action of the level, in order, each must succeed. The first
//! failure stops the step, marks the level failed and alerts; the view keeps the previous
//! level and shows exactly the effects that did take hold. Re-entering the level in force
//! (its cause changed, so its concurrency effect did) works the same way and leaves the
//! recovery interval's clock alone.

use tracing::{error, info, warn};

use super::actions::DegradationAction;
use super::audit::AuditKind;
use super::controller::{ActionReport, ControllerState, DegradationController, StepReport};
use super::effects::Effects;
use super::level::{Level, LevelCause};
use super::view::LevelFailure;

impl DegradationController {
    pub(crate) async fn enter(
        &self,
        state: &mut ControllerState,
        level: Level,
        trigger: &'static str,
        level_cause: LevelCause,
    ) -> StepReport {
        let from = state.level;
        let wanted = Effects::caused(level, level_cause, &self.config.load());
        let mut actions = Vec::new();
        let mut failure = None;
        for action in DegradationAction::establishing(&wanted) {
            let started = self.clock.instant();
            let result = self.executor.apply_boxed(&action).await;
            let took = self.clock.instant().saturating_duration_since(started);
            let took_ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
            let ok = result.is_ok();
            self.metrics
                .actions
                .with_label_values(&[action.label(), if ok { "ok" } else { "failed" }])
                .inc();
            actions.push(ActionReport {
                action,
                ok,
                error: result.as_ref().err().map(|e| e.0.clone()),
                took_ms,
            });
            match result {
                Ok(()) => action.apply_to(&mut state.effects),
                Err(error) => {
                    failure = Some((action.label(), error.0));
                    break;
                }
            }
        }
        let now = self.clock.unix_millis();
        let entered = failure.is_none();
        match failure {
            Some((action, error)) => {
                self.metrics
                    .level_failures
                    .with_label_values(&[level_label(level)])
                    .inc();
                error!(
                    level = level.as_u8(),
                    staying_at = from.as_u8(),
                    action,
                    %error,
                    trigger,
                    cause = level_cause.label(),
                    "degradation level FAILED: a must-succeed action failed; the level is not in \
                     force (re-applying the level in force: its effects stay as the view shows)"
                );
                let reason = format!("action {action} failed: {error}");
                self.record_audit(
                    AuditKind::LevelFailed,
                    "controller",
                    from,
                    level,
                    &reason,
                    false,
                );
                state.failed = Some(LevelFailure {
                    level,
                    action,
                    error,
                    at_unix_ms: now,
                });
            }
            None => {
                self.metrics
                    .transitions
                    .with_label_values(&[level_label(from), level_label(level), trigger])
                    .inc();
                let cause = level_cause.label();
                let concurrency_ratio = wanted.concurrency_ratio;
                match level.cmp(&from) {
                    std::cmp::Ordering::Greater => warn!(
                        from = from.as_u8(),
                        to = level.as_u8(),
                        trigger,
                        cause,
                        concurrency_ratio,
                        "degradation level raised"
                    ),
                    std::cmp::Ordering::Less => info!(
                        from = from.as_u8(),
                        to = level.as_u8(),
                        trigger,
                        cause,
                        concurrency_ratio,
                        "degradation level lowered"
                    ),
                    std::cmp::Ordering::Equal => info!(
                        level = level.as_u8(),
                        cause, concurrency_ratio, "degradation level re-applied: its cause changed"
                    ),
                }
                if level != from {
                    state.since = now;
                }
                state.level = level;
                state.cause = level_cause;
                state.failed = None;
            }
        }
        self.publish(state);
        StepReport {
            level,
            actions,
            entered,
        }
    }
}

fn level_label(level: Level) -> &'static str {
    match level {
        Level::Normal => "0",
        Level::Conservative => "1",
        Level::Shrink => "2",
        Level::Survival => "3",
    }
}
