//! Graded degradation: one level at a time, the 5-minute recovery rule, must-succeed
//! actions (a failure is surfaced, never hidden), forced levels, drills, and actions that
//! really reach the warmup manager.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use switchyard_warmup::degradation::{AuditKind, CallerPolicy, OverloadState, ServeMode, Signals};
use switchyard_warmup::{
    ActionError, ActionExecutor, DegradationAction, DegradationConfig, DegradationController,
    DegradationError, LazyWarm, Level, Tier, WarmupManager, WarmupOptions,
};

fn water(level: f64) -> Signals {
    Signals {
        water_level: Some(level),
        overload: OverloadState::Normal,
    }
}

fn entered(evaluation: &switchyard_warmup::degradation::Evaluation) -> Vec<u8> {
    evaluation
        .steps
        .iter()
        .filter(|s| s.entered)
        .map(|s| s.level.as_u8())
        .collect()
}

#[tokio::test]
async fn worsening_goes_one_level_at_a_time_and_95_percent_passes_through_level_2() {
    let (controller, actions, _clock, registry) = controller();
    let view = controller.view();
    let warned = controller.evaluate(water(0.72)).await;
    assert_eq!(
        (warned.to, warned.steps.len()),
        (Level::Normal, 0),
        "70 % records only"
    );
    assert_eq!(
        metric(
            &registry,
            "switchyard_degradation_water_warnings_total",
            &[]
        ),
        1.0
    );
    assert!(actions.applied.lock().is_empty());

    let soft = controller.evaluate(water(0.81)).await;
    assert_eq!(entered(&soft), vec![1]);
    assert_eq!(view.load().level, Level::Conservative);
    assert!(!view.load().effects.warmup.lazy);

    let hard = controller.evaluate(water(0.96)).await;
    assert_eq!(entered(&hard), vec![2, 3], "level 3 via level 2");
    assert_eq!(view.load().level, Level::Survival);
    assert_eq!(view.load().effects.serve, ServeMode::CacheAndWarmedOnly);
    assert_eq!(
        actions.applied.lock().len(),
        12,
        "4 must-succeed actions per level"
    );
    let via_two = [("from", "2"), ("to", "3"), ("cause", "signal")];
    assert_eq!(
        metric(
            &registry,
            "switchyard_degradation_transitions_total",
            &via_two
        ),
        1.0
    );
    assert_eq!(metric(&registry, "switchyard_degradation_level", &[]), 3.0);

    let overloaded = Signals {
        water_level: Some(0.1),
        overload: OverloadState::Overloaded,
    };
    let (controller, _, _, _) = self::controller();
    assert_eq!(
        entered(&controller.evaluate(overloaded).await),
        vec![1],
        "overload alone stops at level 1: level 2's demotion would meet the P2 pause"
    );
}

#[tokio::test]
async fn recovery_improves_at_most_one_level_per_five_minutes() {
    let (controller, _actions, clock, registry) = controller();
    controller.evaluate(water(0.97)).await;
    let calm = water(0.10);
    let held = controller.evaluate(calm).await;
    assert!(held.recovery_held && held.to == Level::Survival);
    clock.advance(Duration::from_secs(299));
    assert_eq!(controller.evaluate(calm).await.to, Level::Survival);
    clock.advance(Duration::from_secs(1));
    assert_eq!(controller.evaluate(calm).await.to, Level::Shrink);
    assert_eq!(
        controller.evaluate(calm).await.to,
        Level::Shrink,
        "one level per step"
    );
    clock.advance(Duration::from_secs(300));
    assert_eq!(controller.evaluate(calm).await.to, Level::Conservative);
    clock.advance(Duration::from_secs(300));
    assert_eq!(controller.evaluate(calm).await.to, Level::Normal);
    assert!(metric(&registry, "switchyard_degradation_recovery_held_total", &[]) >= 3.0);
    let status = controller.status().await;
    assert_eq!(status.next_recovery_unix_ms, None);
}

#[tokio::test]
async fn a_failed_action_marks_the_level_failed_and_nothing_pretends_it_is_active() {
    let (controller, actions, clock, registry) = controller();
    *actions.fail_when.lock() = Some(Box::new(|a| {
        matches!(
            a,
            DegradationAction::ServeMode {
                mode: ServeMode::CacheAndWarmedOnly
            }
        )
    }));
    let evaluation = controller.evaluate(water(0.96)).await;
    assert_eq!(entered(&evaluation), vec![1, 2]);
    let failed_step = evaluation.steps.last().unwrap();
    assert_eq!(
        (failed_step.level, failed_step.entered),
        (Level::Survival, false)
    );
    assert!(!failed_step.actions.last().unwrap().ok);
    let view = controller.view().load_full();
    assert_eq!(view.level, Level::Shrink, "level 3 is not in force");
    let failure = view.failed.clone().unwrap();
    assert_eq!(
        (failure.level, failure.action),
        (Level::Survival, "serve_mode")
    );
    // The view shows what did take hold: callers are already core-only, serving is not.
    assert_eq!(view.effects.callers, CallerPolicy::CoreOnly);
    assert_eq!(view.effects.serve, ServeMode::Normal);
    assert_eq!(
        metric(
            &registry,
            "switchyard_degradation_level_failures_total",
            &[("level", "3")]
        ),
        1.0
    );
    assert!(
        controller
            .audit()
            .iter()
            .any(|e| e.kind == AuditKind::LevelFailed && !e.ok)
    );

    // Not retried for failed_retry_secs (30 s), then retried; once it works it holds.
    let attempts = || actions.applied.lock().len();
    let before = attempts();
    assert!(controller.evaluate(water(0.96)).await.steps.is_empty());
    assert_eq!(attempts(), before);
    clock.advance(Duration::from_secs(30));
    *actions.fail_when.lock() = None;
    assert_eq!(entered(&controller.evaluate(water(0.96)).await), vec![3]);
    assert!(controller.view().load().failed.is_none());
}

#[tokio::test]
async fn forcing_pins_a_level_with_an_audit_trail_until_released() {
    let (controller, _actions, clock, registry) = controller();
    assert!(matches!(
        controller.force(Level::Shrink, " ", "no name").await,
        Err(DegradationError::Anonymous(_))
    ));
    let forced = controller
        .force(Level::Shrink, "alice", "provider incident")
        .await
        .unwrap();
    assert!(forced.ok && forced.steps.len() == 2);
    assert_eq!(
        controller.view().load().forced.as_ref().unwrap().by,
        "alice"
    );
    let ignored = controller.evaluate(water(0.99)).await;
    assert!(
        ignored.forced && ignored.to == Level::Shrink,
        "signals do not move a pin"
    );
    assert!(matches!(
        controller.drill(Level::Survival, "carol").await,
        Err(DegradationError::Forced)
    ));
    assert!(controller.release("bob", "incident over").await.unwrap());
    assert_eq!(controller.evaluate(water(0.99)).await.to, Level::Survival);
    clock.advance(Duration::from_secs(300));
    assert_eq!(controller.evaluate(water(0.1)).await.to, Level::Shrink);
    let audit = controller.audit();
    let kinds: Vec<(AuditKind, &str)> = audit.iter().map(|e| (e.kind, e.by.as_str())).collect();
    assert_eq!(
        kinds,
        vec![(AuditKind::Force, "alice"), (AuditKind::Release, "bob")]
    );
    assert_eq!(
        metric(
            &registry,
            "switchyard_degradation_overrides_total",
            &[("kind", "force")]
        ),
        1.0
    );
}

#[tokio::test]
async fn a_drill_reports_every_action_detection_and_recovery_without_restart() {
    let (controller, actions, _clock, registry) = controller();
    let report = controller.drill(Level::Shrink, "carol").await.unwrap();
    assert!(report.passed, "{report:?}");
    assert_eq!(
        report
            .steps
            .iter()
            .map(|s| s.level.as_u8())
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert!(
        report
            .steps
            .iter()
            .all(|s| s.actions.len() == 4 && s.actions.iter().all(|a| a.ok))
    );
    assert_eq!(
        report
            .recovery
            .iter()
            .map(|s| s.level.as_u8())
            .collect::<Vec<_>>(),
        vec![1, 0]
    );
    assert_eq!(report.detected_in_ms, Some(0));
    assert_eq!(
        controller.view().load().level,
        Level::Normal,
        "recovered, no restart"
    );

    *actions.fail_when.lock() = Some(Box::new(|a| {
        matches!(
            a,
            DegradationAction::CallerPolicy {
                policy: CallerPolicy::NonCoreLowestPriority,
                ..
            }
        )
    }));
    let failed = controller.drill(Level::Shrink, "carol").await.unwrap();
    assert!(!failed.passed && !failed.reached && failed.recovered);
    let broken = failed.steps.last().unwrap().actions.last().unwrap();
    assert_eq!((broken.action.label(), broken.ok), ("caller_policy", false));
    assert!(
        broken
            .error
            .as_deref()
            .unwrap()
            .contains("could not be applied")
    );
    assert_eq!(
        metric(
            &registry,
            "switchyard_degradation_drills_total",
            &[("result", "failed")]
        ),
        1.0
    );
    let drills: Vec<bool> = controller
        .audit()
        .iter()
        .filter(|e| e.kind == AuditKind::Drill)
        .map(|e| e.ok)
        .collect();
    assert_eq!(drills, vec![true, false]);
}

/// The gateway's executor: warmup limits go to the warmup manager, the rest is recorded.
struct GatewayActions {
    warmup: WarmupManager,
}

impl ActionExecutor for GatewayActions {
    async fn apply(&self, action: &DegradationAction) -> Result<(), ActionError> {
        match action {
            DegradationAction::WarmupLimits(limits) => self
                .warmup
                .set_limits(*limits)
                .await
                .map_err(|e| ActionError(e.to_string())),
            _ => Ok(()),
        }
    }
}

#[tokio::test]
async fn warmup_limits_reach_the_manager_and_a_dead_manager_fails_the_level() {
    let (_clock, wall) = manual_wall(0);
    let options = WarmupOptions {
        clock: wall.clone(),
        ..Default::default()
    };
    let (warmup, join) = WarmupManager::start(
        config(vec![instance("tail", Tier::L2)]),
        Arc::new(FakeExecutor::new()),
        options,
        &prometheus::Registry::new(),
    )
    .await
    .unwrap();
    let actions = Arc::new(GatewayActions {
        warmup: warmup.clone(),
    });
    let registry = prometheus::Registry::new();
    let shrink_on_overload = DegradationConfig {
        overload_level: Level::Shrink,
        ..DegradationConfig::default()
    };
    let controller =
        DegradationController::new(shrink_on_overload, actions, wall, &registry).unwrap();
    controller.evaluate(water(0.85)).await;
    assert!(!warmup.limits().lazy && warmup.limits().scheduled_frequency == 0.5);
    assert_eq!(warmup.lazy_warm("tail").await, LazyWarm::Disabled);

    warmup.stop();
    join.await.unwrap();
    let evaluation = controller.evaluate(water(0.85)).await;
    assert_eq!(
        evaluation.to,
        Level::Conservative,
        "unchanged target: nothing to do"
    );
    let overloaded = Signals {
        water_level: Some(0.85),
        overload: OverloadState::Overloaded,
    };
    let failed = controller.evaluate(overloaded).await;
    assert_eq!(
        failed.to,
        Level::Conservative,
        "level 2 could not stop L1 warmups"
    );
    let view = controller.view().load_full();
    assert_eq!(view.failed.as_ref().unwrap().action, "warmup_limits");
}
