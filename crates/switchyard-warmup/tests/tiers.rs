//! Tier behaviour with an injected clock: L0 keep-alive and its failure alert, L1 lead time
//! and cooling, L2 singleflight, budget skips, degradation limits, hit accounting.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::Purpose;
use switchyard_warmup::{LazyWarm, PeakWindow, SkipReason, Tier, WarmupLimits, WarmupResult};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[tokio::test]
async fn l0_is_kept_alive_every_interval_and_a_failure_alerts() {
    let (clock, wall) = manual_wall(8 * 3600);
    let executor = Arc::new(FakeExecutor::new());
    let (manager, registry) = start(
        config(vec![instance("core", Tier::L0)]),
        executor.clone(),
        wall,
    )
    .await;

    let first = manager.tick().await.unwrap();
    assert_eq!(first.started.len(), 1, "never warmed: due at once");
    manager.wait_idle().await;
    assert_eq!(manager.is_warm("core"), Some(true));

    clock.advance(secs(29 * MIN));
    assert!(manager.tick().await.unwrap().started.is_empty());
    clock.advance(secs(MIN));
    assert_eq!(
        manager.tick().await.unwrap().started.len(),
        1,
        "30 min keep-alive"
    );
    manager.wait_idle().await;
    assert_eq!(executor.calls(), 2);

    *executor.fail.lock() = true;
    clock.advance(secs(30 * MIN));
    manager.tick().await.unwrap();
    manager.wait_idle().await;
    let alerts = metric(
        &registry,
        "switchyard_warmup_alerts_total",
        &[("reason", "l0_failure")],
    );
    assert_eq!(alerts, 1.0);
    let failed = [("tier", "L0"), ("result", "failed")];
    assert_eq!(
        metric(&registry, "switchyard_warmup_runs_total", &failed),
        1.0
    );
    // After a failure the next attempt comes after failure_retry_secs (60 s), not 30 min.
    clock.advance(secs(59));
    assert!(manager.tick().await.unwrap().started.is_empty());
    clock.advance(secs(1));
    assert_eq!(manager.tick().await.unwrap().started.len(), 1);
    manager.wait_idle().await;
    manager.stop();
}

#[tokio::test]
async fn l1_warms_a_lead_time_before_its_peak_and_cools_after() {
    let (clock, wall) = manual_wall(8 * 3600); // 08:00 UTC
    let executor = Arc::new(FakeExecutor::new());
    let mut peak = instance("reports", Tier::L1);
    peak.peak_windows = vec![PeakWindow::try_from("09:00-10:00".to_string()).unwrap()];
    let (manager, _registry) = start(config(vec![peak]), executor.clone(), wall).await;

    clock.advance(secs(39 * MIN)); // 08:39
    assert!(manager.tick().await.unwrap().started.is_empty());
    clock.advance(secs(MIN)); // 08:40 = 09:00 − 20 min lead
    assert_eq!(manager.tick().await.unwrap().started.len(), 1);
    manager.wait_idle().await;
    clock.advance(secs(29 * MIN)); // 09:09
    assert!(manager.tick().await.unwrap().started.is_empty());
    clock.advance(secs(MIN)); // 09:10: re-warm every 30 min inside the span
    assert_eq!(manager.tick().await.unwrap().started.len(), 1);
    manager.wait_idle().await;
    clock.advance(secs(30 * MIN)); // 09:40
    assert_eq!(manager.tick().await.unwrap().started.len(), 1);
    manager.wait_idle().await;
    clock.advance(secs(20 * MIN)); // 10:00: the window is over, the resource cools
    assert!(manager.tick().await.unwrap().started.is_empty());
    clock.advance(secs(22 * 3600 + 40 * MIN)); // 08:40 the next day
    assert_eq!(manager.tick().await.unwrap().started.len(), 1);
    manager.wait_idle().await;
    assert_eq!(executor.calls(), 4, "08:40, 09:10, 09:40, next day 08:40");
    manager.stop();
}

/// Lets every spawned task run until it blocks (current-thread runtime: FIFO).
async fn run_pending() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn l2_hundred_concurrent_first_requests_trigger_exactly_one_warmup() {
    let (clock, wall) = manual_wall(0);
    let (executor, gate) = FakeExecutor::gated();
    let executor = Arc::new(executor);
    let (manager, registry) = start(
        config(vec![instance("tail", Tier::L2)]),
        executor.clone(),
        wall,
    )
    .await;

    assert!(
        manager.tick().await.unwrap().started.is_empty(),
        "L2 is never scheduled"
    );
    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let manager = manager.clone();
        requests.spawn(async move { manager.lazy_warm("tail").await });
    }
    executor.wait_started(1).await;
    // Every request is now parked: the leader on the gate, the others on its flight.
    run_pending().await;
    gate.add_permits(1);
    let (mut led, mut joined) = (0, 0);
    while let Some(outcome) = requests.join_next().await {
        match outcome.unwrap() {
            LazyWarm::Led(result) => {
                assert!(result.is_warmed());
                led += 1;
            }
            LazyWarm::Joined(result) => {
                assert!(result.is_warmed());
                joined += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!((executor.calls(), led, joined), (1, 1, 99));
    assert_eq!(
        metric(
            &registry,
            "switchyard_warmup_lazy_requests_total",
            &[("outcome", "joined")]
        ),
        99.0
    );
    assert_eq!(manager.lazy_warm("tail").await, LazyWarm::AlreadyWarm);

    // Cold again after cold_after_secs (900 s): the next request warms it again.
    clock.advance(secs(901));
    gate.add_permits(1);
    assert!(matches!(manager.lazy_warm("tail").await, LazyWarm::Led(_)));
    assert_eq!(executor.calls(), 2);

    // Degradation level 1 stops L2.
    manager
        .set_limits(WarmupLimits {
            lazy: false,
            ..WarmupLimits::ALL
        })
        .await
        .unwrap();
    clock.advance(secs(901));
    assert_eq!(manager.lazy_warm("tail").await, LazyWarm::Disabled);
    assert_eq!(manager.lazy_warm("nope").await, LazyWarm::Unknown);
    manager.stop();
}

#[tokio::test]
async fn the_budget_stops_warmups_that_do_not_fit_and_reports_the_plan() {
    let (clock, wall) = manual_wall(0);
    let executor = Arc::new(FakeExecutor::new());
    let mut config = config(vec![instance("tail", Tier::L2)]);
    // 10 000 × (1 − 0.5) × 0.6 = 3000 tokens: three warmups of 1000.
    config.budget.total_quota = 10_000;
    config.budget.business_peak_share = 0.5;
    config.budget.safety = 0.6;
    let (manager, registry) = start(config, executor.clone(), wall).await;
    for _ in 0..3 {
        assert!(matches!(
            manager.lazy_warm("tail").await,
            LazyWarm::Led(WarmupResult::Warmed { .. })
        ));
        clock.advance(secs(901));
    }
    assert_eq!(
        manager.lazy_warm("tail").await,
        LazyWarm::Led(WarmupResult::Skipped(SkipReason::Budget))
    );
    assert_eq!(executor.calls(), 3);
    let skipped = [("tier", "L2"), ("reason", "budget")];
    assert_eq!(
        metric(&registry, "switchyard_warmup_skipped_total", &skipped),
        1.0
    );
    manager.note_spend(Purpose::Business, 9_000);
    manager.note_spend(Purpose::Warmup, 5_000); // counted from outcomes, not here
    let report = manager.report();
    assert_eq!(report.period_spent_tokens, 3_000);
    assert_eq!(report.cost_ratio, Some(0.25));
    assert_eq!(report.plan.budget_tokens, 3_000);
    // A new UTC day starts a new budget period.
    clock.advance(secs(86_400));
    assert!(matches!(
        manager.lazy_warm("tail").await,
        LazyWarm::Led(WarmupResult::Warmed { .. })
    ));
    manager.stop();
}

#[tokio::test]
async fn over_plan_report_comes_from_the_live_config() {
    let (_clock, wall) = manual_wall(0);
    let resources = (0..20).map(|i| {
        let mut r = instance(&format!("core{i}"), Tier::L0);
        r.estimated_cost_tokens = 1_200;
        r
    });
    let mut config = config(resources.collect());
    config.budget.total_quota = 1_000_000;
    let (manager, registry) = start(config, Arc::new(FakeExecutor::new()), wall).await;
    let plan = manager.plan();
    assert_eq!(
        plan.message.as_deref(),
        Some("L0: 20 resources × every 30 min = 960/day > 146 allowed")
    );
    assert_eq!(plan.options.len(), 3);
    assert_eq!(metric(&registry, "switchyard_warmup_plan_fits", &[]), 0.0);
    assert_eq!(
        metric(&registry, "switchyard_warmup_plan_max_warmups", &[]),
        146.0
    );
    // Retry amplification makes each warmup dearer: fewer fit.
    manager.note_retry_amplification(150, 100);
    assert_eq!(manager.plan().max_warmups, 97, "176000 / (1200 × 1.5)");
    manager.stop();
}

#[tokio::test]
async fn hits_misses_first_request_latency_and_demotion_candidates() {
    let (clock, wall) = manual_wall(0);
    let executor = Arc::new(FakeExecutor::new());
    let mut config = config(vec![instance("core", Tier::L0)]);
    config.demotion_min_samples = 4;
    let (manager, registry) = start(config, executor, wall).await;
    let warm_and_wait = async |used_after: Option<u64>| {
        manager.tick().await.unwrap();
        manager.wait_idle().await;
        if let Some(after) = used_after {
            clock.advance(secs(after));
            manager.note_use("core", Some(Duration::from_millis(300)));
        }
        clock.advance(secs(30 * MIN - used_after.unwrap_or(0)));
    };
    warm_and_wait(Some(4 * MIN)).await; // hit
    for _ in 0..4 {
        warm_and_wait(None).await; // misses
    }
    manager.tick().await.unwrap();
    manager.wait_idle().await;
    let report = manager.report();
    let core = &report.resources[0];
    assert_eq!((core.hits, core.misses), (1, 4));
    assert_eq!(core.demotion_candidate, Some(Tier::L1), "20 % < 30 %");
    assert_eq!(
        metric(&registry, "switchyard_warmup_demotion_candidates", &[]),
        1.0
    );
    let warmed = [("state", "warmed")];
    assert_eq!(
        metric(
            &registry,
            "switchyard_warmup_first_request_seconds",
            &warmed
        ),
        1.0
    );
    // A use long after the last warmup and use is a cold first request.
    clock.advance(secs(3_600));
    manager.note_use("core", Some(Duration::from_secs(8)));
    assert_eq!(
        metric(
            &registry,
            "switchyard_warmup_first_request_seconds",
            &[("state", "cold")]
        ),
        1.0
    );
    assert_eq!(
        manager.resources_for("m", "any prompt", None),
        vec![Arc::from("core")]
    );
    manager.stop();
}

#[tokio::test(start_paused = true)]
async fn the_manager_ticks_on_its_own_when_given_an_interval() {
    let (_clock, wall) = manual_wall(0);
    let executor = Arc::new(FakeExecutor::new());
    let mut config = config(vec![instance("core", Tier::L0)]);
    config.tick_interval_ms = 1_000;
    let (manager, _registry) = start(config, executor.clone(), wall).await;
    assert_eq!(executor.calls(), 0);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    manager.wait_idle().await;
    assert_eq!(
        executor.calls(),
        1,
        "the first automatic tick warmed the L0 resource"
    );
    manager.stop();
}

#[tokio::test]
async fn reload_keeps_the_state_of_resources_that_stay() {
    let (_clock, wall) = manual_wall(0);
    let executor = Arc::new(FakeExecutor::new());
    let initial = config(vec![instance("core", Tier::L0), instance("old", Tier::L0)]);
    let (manager, _registry) = start(initial, executor.clone(), wall).await;
    manager.tick().await.unwrap();
    manager.wait_idle().await;
    let mut next = config(vec![instance("core", Tier::L0), instance("new", Tier::L2)]);
    next.hit_window_secs = 600;
    manager.reload(next.clone()).await.unwrap();
    assert_eq!(manager.is_warm("core"), Some(true), "state carried over");
    assert_eq!(manager.is_warm("old"), None);
    assert_eq!(manager.is_warm("new"), Some(false));
    assert!(
        manager.tick().await.unwrap().started.is_empty(),
        "core is not due again yet"
    );
    next.budget.safety = 0.3;
    assert!(
        manager.reload(next).await.is_err(),
        "safety below 0.5 is refused"
    );
    manager.stop();
}
