#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Degradation in the running gateway, over real sockets with fake workers: a forced level
//! changes who is served and how, a failing action leaves the level failed and not in force,
//! and the model downgrade chain moves down, discloses, and falls back to the response cache.

mod common;
mod warmup_support;

use common::*;
use http::Method;
use serde_json::{Value, json};
use std::time::Duration;
use switchyard_warmup::{ModelProfile, ResourceKind, Tier};
use warmup_support::*;

#[tokio::test]
async fn level_three_serves_core_callers_from_cache_or_warm_resources_and_others_the_fallback() {
    let worker = FakeWorker::start("a", &["m", "w"], NO_DELAY).await;
    let config = config(&[&worker], "round_robin");
    let mut config = with_tenants(
        config,
        json!([
            {"api_key": "sk-core", "caller": "ops", "max_priority": "P0", "core": true},
            {"api_key": "sk-app", "caller": "app", "max_priority": "P1"},
        ]),
    );
    config.warmup.resources = vec![resource("warm-w", ResourceKind::Instance, Tier::L0, "w")];
    let (gateway, clock) = start(config).await;
    let base = gateway.base_url();
    assert_eq!(warm_scheduled(&gateway).await, 1);
    let hello = chat_body("m", None, "hello");
    let first = chat_as(&base, Some("sk-core"), &[], &hello).await;
    assert_eq!(first.status, 200, "{}", first.body);

    let forced = admin(
        Method::PUT,
        &base,
        "/admin/degradation",
        json!({"level": 3, "reason": "survival test"}),
    )
    .await;
    assert_eq!(forced.status, 200, "{}", forced.body);
    assert_eq!(forced.json()["forced"]["reached"], 3);
    assert_eq!(
        forced.json()["forced"]["steps"].as_array().unwrap().len(),
        3,
        "one level at a time"
    );

    let refused = chat_as(&base, Some("sk-app"), &[], &hello).await;
    assert_eq!(refused.status, 503, "{}", refused.body);
    assert_eq!(refused.error_code(), "degraded_unavailable");
    assert!(refused.header("retry-after").is_some());
    let cached = chat_as(&base, Some("sk-core"), &[], &hello).await;
    assert_eq!(cached.status, 200, "{}", cached.body);
    assert_eq!(cached.header("x-switchyard-degraded"), Some("cache"));
    assert_eq!(cached.body, first.body);
    let warm = chat_as(
        &base,
        Some("sk-core"),
        &[],
        &chat_body("w", None, "new question"),
    )
    .await;
    assert_eq!(
        warm.status, 200,
        "a warm resource still serves: {}",
        warm.body
    );
    assert_eq!(warm.header("x-switchyard-worker"), Some("a"));
    assert_eq!(warm.header("x-switchyard-degraded"), None);
    let cold = chat_as(
        &base,
        Some("sk-core"),
        &[],
        &chat_body("m", None, "never asked"),
    )
    .await;
    assert_eq!(cold.status, 503);
    assert_eq!(cold.error_code(), "degraded_unavailable");

    let status = admin(Method::GET, &base, "/admin/degradation", Value::Null)
        .await
        .json();
    assert_eq!(status["view"]["level"], 3);
    assert_eq!(status["view"]["forced"]["by"], "admin");
    assert_eq!(status["audit"][0]["kind"], "force");
    let verdict = |v: &str| format!("switchyard_degradation_verdicts_total{{verdict=\"{v}\"}}");
    assert_eq!(metric(&base, &verdict("fallback")).await, 1.0);
    assert_eq!(metric(&base, &verdict("cached_or_warmed_only")).await, 3.0);

    // Released, the level recovers one step per recovery interval (5 min), not at once.
    let released = admin(
        Method::PUT,
        &base,
        "/admin/degradation",
        json!({"release": true, "reason": "over"}),
    )
    .await;
    assert_eq!(released.json()["released"], true);
    let state = gateway.state().clone();
    let level = || state.warmup.view.load().level.as_u8();
    switchyard_gateway::warmup::evaluate_once(&state.stack, &state.warmup).await;
    assert_eq!(level(), 3, "held: the last change is younger than 5 min");
    for expected in [2, 1, 0] {
        clock.advance(Duration::from_secs(301));
        switchyard_gateway::warmup::evaluate_once(&state.stack, &state.warmup).await;
        assert_eq!(level(), expected);
    }
    let served = chat_as(&base, Some("sk-app"), &[], &hello).await;
    assert_eq!(served.status, 200);
    gateway.shutdown().await;
}

#[tokio::test]
async fn a_failing_action_marks_the_level_failed_and_it_is_not_in_force() {
    let worker = FakeWorker::start("a", &["m"], NO_DELAY).await;
    // Nobody is a core caller: "core callers only" would refuse everyone.
    let (gateway, _clock) = start(config(&[&worker], "round_robin")).await;
    let base = gateway.base_url();
    let forced = admin(
        Method::PUT,
        &base,
        "/admin/degradation",
        json!({"level": 3, "reason": "no core callers"}),
    )
    .await;
    assert_eq!(forced.status, 500, "{}", forced.body);
    let report = &forced.json()["forced"];
    assert_eq!(
        (report["ok"].clone(), report["reached"].clone()),
        (json!(false), json!(2))
    );
    let failed_step = &report["steps"][2];
    assert_eq!(failed_step["entered"], false);
    let last = failed_step["actions"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (last["action"]["action"].clone(), last["ok"].clone()),
        (json!("caller_policy"), json!(false))
    );
    let status = admin(Method::GET, &base, "/admin/degradation", Value::Null)
        .await
        .json();
    assert_eq!(
        status["view"]["level"], 2,
        "the failed level is not in force"
    );
    assert_eq!(status["view"]["failed"]["level"], 3);
    assert_eq!(status["view"]["failed"]["action"], "caller_policy");
    assert_eq!(
        metric(
            &base,
            "switchyard_degradation_level_failures_total{level=\"3\"}"
        )
        .await,
        1.0
    );
    let served = chat_as(
        &base,
        None,
        &[],
        &chat_body("m", None, "still served at level 2"),
    )
    .await;
    assert_eq!(served.status, 200, "{}", served.body);
    gateway.shutdown().await;

    // A warmup manager that no longer answers fails level 1's first action.
    let (gateway, _clock) = start(config(&[&worker], "round_robin")).await;
    let base = gateway.base_url();
    let manager = gateway.state().warmup.manager.clone();
    manager.stop();
    assert!(
        eventually(Duration::from_secs(5), || async {
            manager.tick().await.is_err()
        })
        .await
    );
    let forced = admin(
        Method::PUT,
        &base,
        "/admin/degradation",
        json!({"level": 1, "reason": "manager down"}),
    )
    .await;
    assert_eq!(forced.status, 500, "{}", forced.body);
    let status = admin(Method::GET, &base, "/admin/degradation", Value::Null)
        .await
        .json();
    assert_eq!(status["view"]["level"], 0);
    assert_eq!(status["view"]["failed"]["action"], "warmup_limits");
    assert_eq!(
        gateway.state().stack.admission.capacity_ratio(),
        1.0,
        "actions after the failed one were not applied"
    );
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_chain_moves_down_to_a_model_with_workers_normalising_and_disclosing() {
    let mid = FakeWorker::start("mid-0", &["mid"], NO_DELAY).await;
    let small = FakeWorker::start("small-0", &["small"], NO_DELAY).await;
    let mut config = config(&[&mid, &small], "round_robin");
    config.degradation.chains = vec![chain("flagship", &["big", "mid", "small"])];
    config.degradation.profiles = vec![ModelProfile {
        model: "mid".into(),
        system_role: false,
        max_history_messages: 0,
    }];
    let (gateway, _clock) = start(config).await;
    let base = gateway.base_url();
    let body = chat_body("flagship", Some("Talk like a pirate."), "hello");

    let reply = chat_as(&base, None, &[], &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(
        reply.header("x-switchyard-degraded"),
        Some("mid"),
        "no worker serves `big`"
    );
    assert!(
        reply
            .header("x-switchyard-notice")
            .unwrap()
            .contains("system prompt merged")
    );
    assert_eq!(reply.json()["model"], "mid");
    let seen = mid.seen();
    assert_eq!(seen[0].body["model"], "mid");
    assert_eq!(
        seen[0].body["messages"],
        json!([{"role": "user", "content": "Talk like a pirate.\n\nhello"}]),
        "mid has no system role: the system prompt is folded in"
    );

    let drained = admin(
        Method::DELETE,
        &base,
        "/admin/workers/mid-0?wait=true",
        Value::Null,
    )
    .await;
    assert_eq!(drained.status, 200, "{}", drained.body);
    let reply = chat_as(&base, None, &[], &body).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.header("x-switchyard-degraded"), Some("small"));
    assert_eq!(
        reply.header("x-switchyard-notice"),
        None,
        "small takes a system prompt"
    );
    assert_eq!(small.seen()[0].body["messages"][0]["role"], "system");

    let direct = chat_as(&base, None, &[], &chat_body("small", None, "hi")).await;
    assert_eq!(direct.status, 200);
    assert_eq!(
        direct.header("x-switchyard-degraded"),
        None,
        "not an alias: not degraded"
    );
    let step = |s: &str| format!("switchyard_degradation_downgrades_total{{step=\"{s}\"}}");
    assert_eq!(metric(&base, &step("downgraded")).await, 2.0);
    gateway.shutdown().await;
}

#[tokio::test]
async fn the_cache_fallback_reports_its_age_and_fresh_or_time_sensitive_requests_skip_it() {
    let big = FakeWorker::start("big-0", &["big"], NO_DELAY).await;
    let mut config = config(&[&big], "round_robin");
    config.degradation.chains = vec![chain("flagship", &["big"])];
    let (gateway, clock) = start(config).await;
    let base = gateway.base_url();
    let explain = chat_body("flagship", None, "Explain TCP slow start.");
    let weather = chat_body("flagship", None, "What is the weather today?");
    let first = chat_as(&base, None, &[], &explain).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(
        first.header("x-switchyard-degraded"),
        None,
        "the first link served it"
    );
    assert_eq!(chat_as(&base, None, &[], &weather).await.status, 200);
    assert_eq!(
        gateway.state().warmup.cache.len(),
        2,
        "both answers were cached"
    );

    let removed = admin(
        Method::DELETE,
        &base,
        "/admin/workers/big-0?wait=true",
        Value::Null,
    )
    .await;
    assert_eq!(removed.status, 200);
    clock.advance(Duration::from_secs(90));

    let cached = chat_as(&base, None, &[], &explain).await;
    assert_eq!(cached.status, 200, "{}", cached.body);
    assert_eq!(cached.header("x-switchyard-degraded"), Some("cache"));
    assert_eq!(cached.header("x-switchyard-cache-age"), Some("90"));
    assert_eq!(cached.body, first.body);
    let fresh = chat_as(&base, None, &[("x-switchyard-fresh", "true")], &explain).await;
    assert_eq!(
        fresh.status, 503,
        "fresh requests never get a cached answer"
    );
    assert_eq!(fresh.error_code(), "degraded_unavailable");
    let sensitive = chat_as(&base, None, &[], &weather).await;
    assert_eq!(
        sensitive.status, 503,
        "time-sensitive prompts skip the cache"
    );
    let unseen = chat_as(
        &base,
        None,
        &[],
        &chat_body("flagship", None, "Never asked."),
    )
    .await;
    assert_eq!(unseen.status, 503);
    assert!(
        unseen.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("very busy")
    );
    let lookups =
        |o: &str| format!("switchyard_degradation_cache_lookups_total{{outcome=\"{o}\"}}");
    assert_eq!(metric(&base, &lookups("hit")).await, 1.0);
    assert_eq!(metric(&base, &lookups("time_sensitive")).await, 2.0);
    assert_eq!(metric(&base, &lookups("miss")).await, 1.0);
    gateway.shutdown().await;
}
