#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Hot reload: `PUT /admin/config` and config-file edits change behaviour without a restart,
//! bad changes are refused whole, and everything lands in the audit log.

mod common;

use common::*;
use http::Method;
use std::time::Duration;
use switchyard_sim::Fault;

async fn put_config(base: &str, body: serde_json::Value) -> Reply {
    send(
        Method::PUT,
        &format!("{base}/admin/config"),
        &[("authorization", &format!("Bearer {ALICE_KEY}"))],
        body.to_string(),
    )
    .await
}

const ALICE_KEY: &str = "alice-key-0123456789";

/// Adds a named admin key, so audit entries carry the principal `alice`.
fn with_alice(mut config: switchyard_gateway::Config) -> switchyard_gateway::Config {
    config
        .admin
        .keys
        .push(switchyard_gateway::config::AdminKey {
            name: "alice".into(),
            key: ALICE_KEY.into(),
            role: Default::default(),
        });
    config
}

async fn get_admin(base: &str, path: &str) -> serde_json::Value {
    send(
        Method::GET,
        &format!("{base}{path}"),
        &[("authorization", &format!("Bearer {ADMIN_KEY}"))],
        "",
    )
    .await
    .json()
}

#[tokio::test]
async fn put_config_changes_retry_behaviour_at_run_time() {
    let sims = start_sims(2).await;
    sims[0].set_fault(Fault::Error);
    let mut config = config_for(&sims, "round_robin");
    for spec in &mut config.workers {
        spec.models = Some(vec!["sim-llama".into()]);
    }
    // Only retries are under test: health checks (fast after a failure) and the breaker
    // would otherwise take the failing worker out of routing before the second phase.
    config.health.health.interval_ms = 600_000;
    config.health.health.suspect_interval_ms = 600_000;
    config.health.breaker.minimum_calls = 100;
    let gateway = switchyard_gateway::start(with_alice(config), Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let url = format!("{base}/v1/chat/completions");
    for _ in 0..4 {
        assert_eq!(
            post_json(&url, &chat("sim-llama", "hi", false))
                .await
                .status,
            200
        );
    }

    let reply = put_config(
        &base,
        serde_json::json!({"set": {"retry.max_retries": 0}, "reason": "incident 42: stop retrying"}),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["applied"][0]["path"], "retry.max_retries");

    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            post_json(&url, &chat("sim-llama", "hi", false))
                .await
                .status
                .as_u16(),
        );
    }
    assert!(statuses.contains(&502), "no retries any more: {statuses:?}");
    assert!(statuses.contains(&200), "{statuses:?}");

    let audit = get_admin(&base, "/admin/config/audit").await;
    let entry = &audit["entries"][0];
    assert_eq!(entry["who"], "alice");
    assert_eq!(entry["reason"], "incident 42: stop retrying");
    assert_eq!(entry["changes"][0]["old"], 2);
    assert_eq!(entry["changes"][0]["new"], 0);
}

#[tokio::test]
async fn bad_changes_are_refused_whole_and_audited() {
    let sims = start_sims(1).await;
    let gateway = switchyard_gateway::start(
        with_alice(config_for(&sims, "round_robin")),
        Some(ADMIN_KEY.into()),
    )
    .await
    .unwrap();
    let base = gateway.base_url();

    let reply = put_config(
        &base,
        serde_json::json!({"set": {"retry.max_retries": 1, "retry.max_retry_ratio": 3.0}}),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert!(
        reply.body.contains("retry.max_retry_ratio"),
        "{}",
        reply.body
    );

    let reply = put_config(&base, serde_json::json!({"set": {"retry.max_retires": 1}})).await;
    assert_eq!(reply.status, 400);
    assert!(reply.body.contains("retry.max_retires"));

    let reply = put_config(&base, serde_json::json!({"set": {"server.port": 1}})).await;
    assert_eq!(reply.status, 409);
    assert_eq!(reply.error_code(), "restart_required");

    let config = get_admin(&base, "/admin/config").await;
    assert_eq!(config["retry"]["max_retries"], 2, "old config stays");
    assert_eq!(config["admin"]["api_key"], "<redacted>");
    let audit = get_admin(&base, "/admin/config/audit").await;
    let entries = audit["entries"].as_array().unwrap();
    assert!(entries.iter().all(|e| !e["error"].is_null()), "{audit}");
    assert!(!entries.is_empty());
    let reply = send(Method::PUT, &format!("{base}/admin/config"), &[], "{}").await;
    assert_eq!(reply.status, 401);
}

#[tokio::test]
async fn editing_the_config_file_reloads_the_running_process() {
    let sims = start_sims(1).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    let audit_path = dir.path().join("audit.jsonl");
    let base_text = format!(
        "[server]\nconfig_watch_interval_ms = 50\naudit_log_path = \"{}\"\n",
        audit_path.display()
    );
    std::fs::write(&path, format!("{base_text}[retry]\nmax_retries = 2\n")).unwrap();
    let gateway = GatewayProcess::spawn(&[
        "--config",
        path.to_str().unwrap(),
        "--worker-url",
        &sims[0].base_url(),
    ])
    .await;
    let base = gateway.base_url.clone();

    std::fs::write(&path, format!("{base_text}[retry]\nmax_retries = 1\n")).unwrap();
    let reloaded = eventually(Duration::from_secs(10), || async {
        get_admin(&base, "/admin/config").await["retry"]["max_retries"] == 1
    })
    .await;
    assert!(reloaded, "the file change was not applied");
    // The --worker-url flag still wins over the (worker-less) file after the reload.
    let reply = post_json(
        &format!("{base}/v1/chat/completions"),
        &chat("sim-llama", "hi", false),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    std::fs::write(
        &path,
        format!("{base_text}[retry]\nmax_retries = \"many\"\n"),
    )
    .unwrap();
    let refused = eventually(Duration::from_secs(10), || async {
        get_admin(&base, "/admin/config/audit").await["entries"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| !e["error"].is_null()))
    })
    .await;
    assert!(refused, "the invalid edit was not recorded as refused");
    assert_eq!(
        get_admin(&base, "/admin/config").await["retry"]["max_retries"],
        1
    );
    let lines = std::fs::read_to_string(&audit_path).unwrap();
    assert_eq!(lines.lines().count(), 2, "{lines}");
}
