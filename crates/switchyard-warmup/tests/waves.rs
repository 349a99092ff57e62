//! Waves and their ramp inside the manager, and the misdirected-warmup check: warmups are
//! routed by the shared routing-key function and must land where business traffic goes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{ManualClock, WallClock, WorkerId};
use switchyard_router::{
    Candidate, ConsistentHashConfig, ConsistentHashPolicy, HotspotConfig, RouteRequest,
    RoutingKeyConfig, RoutingKeyInputs, RoutingPolicy, routing_key,
};
use switchyard_warmup::{
    LazyWarm, RampMove, ResourceKind, Tier, WarmupError, WarmupExecutor, WarmupOutcome,
    WarmupResource, WarmupResult,
};

fn l0_fleet(count: usize) -> Vec<switchyard_warmup::ResourceConfig> {
    (0..count)
        .map(|i| instance(&format!("r{i:02}"), Tier::L0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_climbs_its_ramp_and_aborts_after_two_backoffs() {
    let (clock, wall) = manual_wall(0);
    let (executor, gate) = FakeExecutor::gated();
    let executor = Arc::new(executor);
    let mut config = config(l0_fleet(60));
    config.ramp.target_concurrency = 40; // steps: 2, 6, 14, 24, 40 at once
    let (manager, registry) = start(config, executor.clone(), wall).await;

    let first = manager.tick().await.unwrap();
    assert_eq!(
        (first.queued.len(), first.started.len()),
        (60, 2),
        "5 % of 40"
    );
    gate.add_permits(2);
    executor.wait_started(4).await; // both finished, two more started, never more
    assert_eq!(
        executor
            .max_in_flight
            .load(std::sync::atomic::Ordering::SeqCst),
        2
    );

    clock.advance(Duration::from_secs(30));
    let climbed = manager.tick().await.unwrap();
    assert_eq!(climbed.ramp, Some(RampMove::Advance { to: 1 }));
    assert_eq!(climbed.started.len(), 4, "15 % of 40 = 6 at once");
    assert_eq!(manager.report().wave.unwrap().concurrency, 6);

    // The downstream starts failing: > 3 % errors in a window backs off one step…
    *executor.fail.lock() = true;
    gate.add_permits(6);
    executor.wait_started(14).await;
    clock.advance(Duration::from_secs(30));
    let backed = manager.tick().await.unwrap();
    assert_eq!(backed.ramp, Some(RampMove::Backoff { to: 0 }));
    // …and holds that step for two windows (60 s): no judgement after 30 s.
    gate.add_permits(6);
    executor.wait_started(16).await;
    clock.advance(Duration::from_secs(30));
    assert_eq!(manager.tick().await.unwrap().ramp, Some(RampMove::Wait));
    gate.add_permits(2);
    executor.wait_started(18).await;
    clock.advance(Duration::from_secs(30));
    let aborted = manager.tick().await.unwrap();
    assert_eq!(aborted.ramp, Some(RampMove::Abort));
    assert!(aborted.wave_aborted);
    assert_eq!(
        metric(
            &registry,
            "switchyard_warmup_alerts_total",
            &[("reason", "wave_aborted")]
        ),
        1.0
    );
    assert!(manager.report().wave.is_none());
    gate.add_permits(100);
    manager.wait_idle().await;
    assert_eq!(
        executor.calls(),
        18,
        "the queued rest of the wave was dropped"
    );
    manager.stop();
}

#[tokio::test(start_paused = true)]
async fn a_wave_never_runs_more_than_its_step_allows() {
    let (_clock, wall) = manual_wall(0);
    let mut executor = FakeExecutor::new();
    executor.delay = Duration::from_secs(1);
    let executor = Arc::new(executor);
    let mut config = config(l0_fleet(30));
    config.ramp.target_concurrency = 20;
    config.ramp.min_warm_load = 3; // 5 % of 20 = 1 < one instance's minimum warm load
    let (manager, _registry) = start(config, executor.clone(), wall).await;
    assert_eq!(manager.tick().await.unwrap().started.len(), 3);
    manager.wait_idle().await;
    assert_eq!(executor.calls(), 30);
    assert_eq!(
        executor
            .max_in_flight
            .load(std::sync::atomic::Ordering::SeqCst),
        3
    );
    manager.stop();
}

#[tokio::test]
async fn a_warmup_landing_outside_the_business_set_is_misdirected() {
    let (_clock, wall) = manual_wall(0);
    let executor = Arc::new(FakeExecutor::new());
    *executor.landed_on.lock() = Some("group-a-1".into());
    *executor.reachable.lock() = vec!["group-b-1".into(), "group-b-2".into()];
    let (manager, registry) = start(config(vec![instance("tail", Tier::L2)]), executor, wall).await;
    assert!(matches!(
        manager.lazy_warm("tail").await,
        LazyWarm::Led(WarmupResult::Misdirected { .. })
    ));
    assert_eq!(
        manager.is_warm("tail"),
        Some(false),
        "nothing useful was warmed"
    );
    assert_eq!(
        metric(
            &registry,
            "switchyard_warmup_alerts_total",
            &[("reason", "misdirected")]
        ),
        1.0
    );
    let misdirected = [("tier", "L2"), ("result", "misdirected")];
    assert_eq!(
        metric(&registry, "switchyard_warmup_runs_total", &misdirected),
        1.0
    );
    manager.stop();
}

/// Routes warmups like the gateway does: the target's session / user / prompt through a
/// consistent-hash policy (which keys by the shared routing-key function). `own_identity`
/// models a known failure: the warmup job used its own caller id as the session, so its
/// warmups landed where no business session would.
struct RoutedExecutor {
    policy: ConsistentHashPolicy,
    names: Vec<String>,
    own_identity: bool,
}

impl RoutedExecutor {
    fn new(own_identity: bool) -> Self {
        let clock = WallClock::new(Arc::new(ManualClock::new()), Duration::from_secs(1));
        let policy = ConsistentHashPolicy::new(
            ConsistentHashConfig::default(),
            HotspotConfig::default(),
            RoutingKeyConfig::default(),
            clock,
        );
        let names: Vec<String> = (0..8).map(|i| format!("w{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            policy.worker_added(WorkerId(i as u32), name);
        }
        Self {
            policy,
            names,
            own_identity,
        }
    }

    fn route(&self, request: &RouteRequest<'_>) -> String {
        let candidates: Vec<Candidate> = (0..self.names.len())
            .map(|i| Candidate {
                id: WorkerId(i as u32),
                in_flight: 0,
                reported: None,
            })
            .collect();
        let decision = self.policy.select(request, &candidates).unwrap();
        self.names[decision.worker.0 as usize].clone()
    }
}

impl WarmupExecutor for RoutedExecutor {
    async fn warm(&self, resource: &WarmupResource) -> Result<WarmupOutcome, WarmupError> {
        let target = &resource.target;
        let business = RouteRequest {
            prompt: target.prompt.as_deref().unwrap_or(""),
            session_id: target.session_id.as_deref(),
            user: target.user.as_deref(),
        };
        let sent = RouteRequest {
            session_id: if self.own_identity {
                Some("warmup-job")
            } else {
                business.session_id
            },
            ..business
        };
        Ok(WarmupOutcome {
            landed_on: Some(self.route(&sent)),
            business_reachable: vec![self.route(&business)],
            tokens_spent: 10,
        })
    }
}

#[tokio::test]
async fn warmup_lands_on_the_worker_business_traffic_with_the_same_key_reaches() {
    let mut resource = instance("chat-session", Tier::L2);
    resource.kind = ResourceKind::Cache;
    resource.target.prompt = Some("You are the support assistant of ACME.".into());
    resource.target.session_id = Some("session-42".into());
    let business_key = routing_key(
        &RoutingKeyConfig::default(),
        &RoutingKeyInputs {
            session_id: Some("session-42"),
            user: Some("alice"),
            prompt: "You are the support assistant of ACME. Where is my order?",
        },
    )
    .unwrap();

    for (own_identity, expect_ok) in [(false, true), (true, false)] {
        let (_clock, wall) = manual_wall(0);
        let executor = Arc::new(RoutedExecutor::new(own_identity));
        let registry = prometheus::Registry::new();
        let options = switchyard_warmup::WarmupOptions {
            clock: wall,
            ..Default::default()
        };
        let (manager, _join) = switchyard_warmup::WarmupManager::start(
            config(vec![resource.clone()]),
            executor.clone(),
            options,
            &registry,
        )
        .await
        .unwrap();
        let outcome = manager.lazy_warm("chat-session").await;
        let LazyWarm::Led(result) = outcome else {
            panic!("{outcome:?}")
        };
        let business_worker = executor.route(&RouteRequest {
            prompt: "You are the support assistant of ACME. Where is my order?",
            session_id: Some(business_key.key),
            user: Some("alice"),
        });
        match result {
            WarmupResult::Warmed { outcome, .. } => {
                assert!(expect_ok);
                assert_eq!(outcome.landed_on.as_deref(), Some(business_worker.as_str()));
            }
            WarmupResult::Misdirected { outcome, .. } => {
                assert!(!expect_ok, "own identity hashed elsewhere");
                assert_ne!(outcome.landed_on.as_deref(), Some(business_worker.as_str()));
            }
            other => panic!("{other:?}"),
        }
        manager.stop();
    }
}
