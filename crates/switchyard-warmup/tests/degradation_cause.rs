//! What calls for a degradation level decides its concurrency cut: after an overload,
//! capacity is admission's recovery ramp's job, so a level the overload detector alone calls
//! for keeps its warmup effects (stop L2, halve L1) but leaves concurrency at 100 %; the
//! budget water level (alone or with overload) cuts it to `concurrency_ratio`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::time::Duration;
use switchyard_warmup::degradation::{Evaluation, LevelCause, OverloadState, Signals};
use switchyard_warmup::{DegradationAction, Level};

fn entered(evaluation: &Evaluation) -> Vec<u8> {
    evaluation
        .steps
        .iter()
        .filter(|s| s.entered)
        .map(|s| s.level.as_u8())
        .collect()
}

fn signals(water_level: f64, overload: OverloadState) -> Signals {
    Signals {
        water_level: Some(water_level),
        overload,
    }
}

/// After an overload, capacity is admission's recovery ramp's job: an overload-only level 1
/// stops L2 and halves L1 but leaves concurrency at 100 %; the budget water level cuts it.
#[tokio::test]
async fn only_the_budget_water_level_cuts_concurrency_overload_alone_keeps_warmup_effects() {
    for (water_level, overload, cause, ratio) in [
        (0.5, OverloadState::Overloaded, LevelCause::Overload, 1.0),
        (0.85, OverloadState::Normal, LevelCause::BudgetWater, 0.8),
        (
            0.85,
            OverloadState::Overloaded,
            LevelCause::BudgetWaterAndOverload,
            0.8,
        ),
    ] {
        let (controller, actions, _clock, _registry) = controller();
        let evaluation = controller.evaluate(signals(water_level, overload)).await;
        assert_eq!(entered(&evaluation), vec![1], "{cause:?}");
        let view = controller.view().load_full();
        assert_eq!((view.level, view.cause), (Level::Conservative, cause));
        assert_eq!(view.effects.concurrency_ratio, ratio, "{cause:?}");
        assert!(!view.effects.warmup.lazy && view.effects.warmup.scheduled_frequency == 0.5);
        assert!(
            actions
                .applied
                .lock()
                .contains(&DegradationAction::ConcurrencyRatio { ratio })
        );
    }
}

#[tokio::test]
async fn the_concurrency_cut_follows_the_cause_while_the_level_holds_its_five_minutes() {
    let (controller, actions, clock, registry) = controller();
    let view = controller.view();
    controller
        .evaluate(signals(0.5, OverloadState::Overloaded))
        .await;
    let since = view.load().since_unix_ms;
    clock.advance(Duration::from_secs(60));
    // Overload over: level 1 is held (5-min rule), still without a concurrency cut.
    let held = controller
        .evaluate(signals(0.5, OverloadState::Normal))
        .await;
    assert!(held.recovery_held && held.steps.is_empty());
    assert_eq!(
        (view.load().cause, view.load().effects.concurrency_ratio),
        (LevelCause::Overload, 1.0)
    );
    // The budget now calls for level 1 too: the level re-applies with its cut, keeping its clock.
    let hot = controller
        .evaluate(signals(0.85, OverloadState::Normal))
        .await;
    assert_eq!((hot.to, entered(&hot)), (Level::Conservative, vec![1]));
    assert_eq!(
        (view.load().cause, view.load().effects.concurrency_ratio),
        (LevelCause::BudgetWater, 0.8)
    );
    assert_eq!(
        view.load().since_unix_ms,
        since,
        "a cause change is no level change"
    );
    let change = [("from", "1"), ("to", "1"), ("cause", "cause_change")];
    assert_eq!(
        metric(
            &registry,
            "switchyard_degradation_transitions_total",
            &change
        ),
        1.0
    );
    // Overloaded again with the budget cool: the cut goes, must-succeed as ever.
    *actions.fail_when.lock() = Some(Box::new(|a| {
        matches!(a, DegradationAction::ConcurrencyRatio { .. })
    }));
    let failed = controller
        .evaluate(signals(0.5, OverloadState::Overloaded))
        .await;
    assert!(!failed.steps[0].entered);
    let shown = view.load_full();
    assert_eq!(
        (shown.cause, shown.effects.concurrency_ratio),
        (LevelCause::BudgetWater, 0.8),
        "nothing pretends"
    );
    assert_eq!(
        shown.failed.as_ref().map(|f| f.action),
        Some("concurrency_ratio")
    );
    assert!(
        controller
            .evaluate(signals(0.5, OverloadState::Overloaded))
            .await
            .steps
            .is_empty(),
        "retry waits"
    );
    *actions.fail_when.lock() = None;
    clock.advance(Duration::from_secs(30));
    controller
        .evaluate(signals(0.5, OverloadState::Overloaded))
        .await;
    let shown = view.load_full();
    assert_eq!(
        (
            shown.cause,
            shown.effects.concurrency_ratio,
            shown.failed.is_none()
        ),
        (LevelCause::Overload, 1.0, true)
    );
    clock.advance(Duration::from_secs(210));
    assert_eq!(
        controller
            .evaluate(signals(0.1, OverloadState::Normal))
            .await
            .to,
        Level::Normal,
        "5 min after entering level 1"
    );
}

#[tokio::test]
async fn an_operator_forcing_the_level_gets_its_full_effects_until_released() {
    let (controller, _actions, _clock, _registry) = controller();
    let overloaded = signals(0.5, OverloadState::Overloaded);
    controller.evaluate(overloaded).await;
    let report = controller
        .force(Level::Conservative, "oncall", "drill the cut")
        .await
        .unwrap();
    assert!(report.ok && report.steps.len() == 1, "{report:?}");
    let view = controller.view();
    assert_eq!(
        (view.load().cause, view.load().effects.concurrency_ratio),
        (LevelCause::Operator, 0.8)
    );
    assert!(controller.release("oncall", "done").await.unwrap());
    controller.evaluate(overloaded).await;
    assert_eq!(
        (view.load().cause, view.load().effects.concurrency_ratio),
        (LevelCause::Overload, 1.0),
        "back to the signals: overload alone leaves capacity to admission"
    );
    let status = serde_json::to_value(controller.status().await).unwrap();
    assert_eq!(status["view"]["cause"], "overload");
}
