#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Warmup in the running gateway, over real sockets with fake workers: warmups land where
//! business traffic with the same key goes, concurrent first requests share one lazy
//! warmup, the admin API reports and drills, and config changes are followed.

mod common;
mod warmup_support;

use common::*;
use http::Method;
use serde_json::{Value, json};
use std::time::Duration;
use switchyard_warmup::{ResourceConfig, ResourceKind, Tier};
use warmup_support::*;

#[tokio::test]
async fn l0_warmups_land_where_business_traffic_with_the_same_key_goes() {
    let system =
        |i: usize| format!("You are support assistant number {i}. Be precise. ").repeat(12);
    for policy in ["consistent_hash", "cache_aware"] {
        let mut workers = Vec::new();
        for i in 0..4 {
            workers.push(FakeWorker::start(&format!("w{i}"), &["m"], NO_DELAY).await);
        }
        let mut config = config(&workers.iter().collect::<Vec<_>>(), policy);
        let mut cases = Vec::new();
        if policy == "consistent_hash" {
            // Keyed by the session header, as business requests of that session are.
            for i in 0..4 {
                let mut r = resource(
                    &format!("session-{i}"),
                    ResourceKind::Instance,
                    Tier::L0,
                    "m",
                );
                r.target.session_id = Some(format!("s-{i}"));
                cases.push((r.name.clone(), Some(format!("s-{i}")), None));
                config.warmup.resources.push(r);
            }
        }
        // Keyed by the prompt head: the system prompt business chats start with.
        for i in 0..6 {
            let mut r = resource(&format!("prompt-{i}"), ResourceKind::Cache, Tier::L0, "m");
            r.target.prompt = Some(system(i));
            cases.push((r.name.clone(), None, Some(system(i))));
            config.warmup.resources.push(r);
        }
        let (gateway, _clock) = start(config).await;
        let base = gateway.base_url();
        assert_eq!(
            warm_scheduled(&gateway).await,
            cases.len(),
            "{policy}: L0 is due at once"
        );

        let mut landed_on = Vec::new();
        for (name, session, system) in &cases {
            let landing = gateway.state().warmup.landings.get(name).unwrap();
            assert!(
                landing.ok && !landing.misdirected,
                "{policy} {name}: {landing:?}"
            );
            let landed = landing.landed_on.clone().unwrap();
            assert!(landing.business_reachable.contains(&landed));
            let headers: Vec<(&str, &str)> = session
                .as_deref()
                .map(|s| vec![("x-session-id", s)])
                .unwrap_or_default();
            let body = chat_body("m", system.as_deref(), "What is 2 + 2?");
            let reply = chat_as(&base, None, &headers, &body).await;
            assert_eq!(reply.status, 200, "{}", reply.body);
            assert_eq!(
                reply.header("x-switchyard-worker"),
                Some(landed.as_str()),
                "{policy}: business traffic of `{name}` goes where its warmup went"
            );
            landed_on.push(landed);
        }
        landed_on.sort();
        landed_on.dedup();
        assert!(
            landed_on.len() > 1,
            "{policy}: different keys, different workers"
        );
        let warmups: Vec<Seen> = workers
            .iter()
            .flat_map(|w| w.seen())
            .filter(|s| s.purpose == "warmup")
            .collect();
        assert_eq!(
            warmups.len(),
            cases.len(),
            "one front-door request per warmup"
        );
        assert!(warmups.iter().all(|s| s.caller == "switchyard-warmup"));
        assert!(
            warmups.iter().all(|s| s.body["max_tokens"] == 1),
            "1-token completions"
        );

        let report = admin(Method::GET, &base, "/admin/warmup", Value::Null).await;
        assert_eq!(report.status, 200, "{}", report.body);
        let report = report.json();
        assert!(
            report["resources"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| r["warm"] == true)
        );
        assert_eq!(report["landings"].as_object().unwrap().len(), cases.len());
        assert!(report["plan"]["fits"].is_boolean());
        gateway.shutdown().await;
    }
}

#[tokio::test]
async fn concurrent_first_requests_share_one_lazy_warmup() {
    let slow = [
        FakeWorker::start("a", &["m"], Duration::from_millis(1000)).await,
        FakeWorker::start("b", &["m"], Duration::from_millis(1000)).await,
    ];
    let mut config = config(&slow.iter().collect::<Vec<_>>(), "round_robin");
    config.warmup.resources = vec![resource("lazy-m", ResourceKind::Instance, Tier::L2, "m")];
    let (gateway, _clock) = start(config).await;
    let base = gateway.base_url();
    assert_eq!(
        gateway.state().warmup.manager.is_warm("lazy-m"),
        Some(false)
    );

    let mut requests = tokio::task::JoinSet::new();
    for i in 0..20 {
        let base = base.clone();
        requests.spawn(async move {
            chat_as(
                &base,
                None,
                &[],
                &chat_body("m", None, &format!("question {i}")),
            )
            .await
        });
    }
    while let Some(reply) = requests.join_next().await {
        let reply = reply.unwrap();
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let warmups: usize = slow.iter().map(FakeWorker::warmups).sum();
    assert_eq!(warmups, 1, "20 concurrent cold requests, one warmup");
    let outcome = |o: &str| format!("switchyard_warmup_lazy_requests_total{{outcome=\"{o}\"}}");
    assert_eq!(metric(&base, &outcome("led")).await, 1.0);
    assert!(
        metric(&base, &outcome("joined")).await >= 1.0,
        "requests waited for the warmup another one led"
    );
    assert_eq!(gateway.state().warmup.manager.is_warm("lazy-m"), Some(true));

    let reply = chat_as(&base, None, &[], &chat_body("m", None, "later")).await;
    assert_eq!(reply.status, 200);
    let warmups: usize = slow.iter().map(FakeWorker::warmups).sum();
    assert_eq!(warmups, 1, "a warm resource is not warmed again");
    assert!(metric(&base, &outcome("already_warm")).await >= 1.0);
    gateway.shutdown().await;
}

#[tokio::test]
async fn drills_report_and_recover_and_admin_calls_need_the_key() {
    let worker = FakeWorker::start("a", &["m"], NO_DELAY).await;
    let (gateway, _clock) = start(config(&[&worker], "round_robin")).await;
    let base = gateway.base_url();
    let anonymous = send(Method::GET, &format!("{base}/admin/warmup"), &[], "").await;
    assert_eq!(anonymous.status, 401);
    let drill = admin(
        Method::POST,
        &base,
        "/admin/degradation/drill",
        json!({"level": 1}),
    )
    .await;
    assert_eq!(drill.status, 200, "{}", drill.body);
    let report = &drill.json()["drill"];
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["recovered"], true);
    assert_eq!(report["steps"][0]["actions"].as_array().unwrap().len(), 4);
    assert!(report["detected_in_ms"].is_u64());
    assert_eq!(gateway.state().warmup.view.load().level.as_u8(), 0);
    assert_eq!(
        gateway.state().stack.admission.capacity_ratio(),
        1.0,
        "recovered capacity"
    );

    let forced = admin(
        Method::PUT,
        &base,
        "/admin/degradation",
        json!({"level": 1, "reason": "pin"}),
    )
    .await;
    assert_eq!(forced.status, 200);
    assert_eq!(
        gateway.state().stack.admission.capacity_ratio(),
        0.8,
        "level 1: 80 % concurrency"
    );
    let refused = admin(
        Method::POST,
        &base,
        "/admin/degradation/drill",
        json!({"level": 2}),
    )
    .await;
    assert_eq!(refused.status, 409);
    let unreasoned = admin(
        Method::PUT,
        &base,
        "/admin/degradation",
        json!({"level": 2, "reason": ""}),
    )
    .await;
    assert_eq!(unreasoned.status, 400);
    let bad = admin(
        Method::PUT,
        &base,
        "/admin/degradation",
        json!({"level": 7, "reason": "x"}),
    )
    .await;
    assert_eq!(bad.status, 400);
    gateway.shutdown().await;
}

#[tokio::test]
async fn warmup_and_degradation_follow_config_changes_except_the_cache() {
    let worker = FakeWorker::start("a", &["m"], NO_DELAY).await;
    let (gateway, _clock) = start(config(&[&worker], "round_robin")).await;
    let base = gateway.base_url();
    let put = |set: Value| {
        let base = base.clone();
        async move {
            admin(
                Method::PUT,
                &base,
                "/admin/config",
                json!({"set": set, "reason": "t"}),
            )
            .await
        }
    };
    assert_eq!(
        put(json!({"degradation.level1_at": 0.85})).await.status,
        200
    );
    assert_eq!(gateway.state().warmup.controller.config().level1_at, 0.85);
    assert_eq!(put(json!({"warmup.enabled": false})).await.status, 200);
    let manager = gateway.state().warmup.manager.clone();
    assert!(
        eventually(Duration::from_secs(5), || async {
            !manager.report().enabled
        })
        .await
    );
    let refused = put(json!({"degradation.cache.max_entries": 5})).await;
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(refused.error_code(), "restart_required");
    gateway.shutdown().await;
}

#[tokio::test]
async fn connection_and_context_warmups_touch_the_workers_without_spending_quota() {
    let worker = FakeWorker::start("w0", &["m"], NO_DELAY).await;
    let mut config = config(&[&worker], "round_robin");
    let mut connection = ResourceConfig::new("pool-w0", ResourceKind::Connection, Tier::L0);
    connection.target.worker = Some("w0".into());
    let mut models = ResourceConfig::new("models", ResourceKind::Context, Tier::L0);
    models.target.snapshot = Some("models".into());
    let mut gone = ResourceConfig::new("pool-gone", ResourceKind::Connection, Tier::L0);
    gone.target.worker = Some("gone".into());
    config.warmup.resources = vec![connection, models, gone];
    // The gateway routes by ["m", "x"]; the worker announces only "m".
    config.workers[0].models = Some(vec!["m".into(), "x".into()]);
    let (gateway, _clock) = start(config).await;
    assert_eq!(warm_scheduled(&gateway).await, 3);
    let landings = &gateway.state().warmup.landings;
    let pool = landings.get("pool-w0").unwrap();
    assert!(pool.ok && !pool.misdirected, "{pool:?}");
    assert_eq!(pool.landed_on.as_deref(), Some("w0"));
    assert_eq!(pool.tokens_spent, 0);
    let drift = landings.get("models").unwrap();
    assert!(!drift.ok);
    assert!(drift.error.unwrap().contains("model lists changed"));
    let unknown = landings.get("pool-gone").unwrap();
    assert!(unknown.error.unwrap().contains("no worker named `gone`"));
    assert_eq!(worker.warmups(), 0, "no completion was sent");
    let base = gateway.base_url();
    let alerts = metric(
        &base,
        "switchyard_warmup_alerts_total{reason=\"l0_failure\"}",
    )
    .await;
    assert_eq!(alerts, 2.0, "failed L0 warmups alert");
    gateway.shutdown().await;
}
