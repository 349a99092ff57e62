#![allow(clippy::unwrap_used, clippy::expect_used)]
//! No configured secret (tenant API keys, admin keys, the cluster secret, the metrics token)
//! leaves the gateway: not in any admin response (to any role), not in the config audit log
//! (memory or file), not in a log line.

mod common;

use common::*;
use http::Method;
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use switchyard_gateway::config::{AdminRole, Config, ListenerConfig};
use switchyard_gateway::{StartOptions, start_with};

const TENANT_KEY: &str = "sk-tenant-secret-aaaa-0001";
const OTHER_TENANT_KEY: &str = "sk-tenant-secret-bbbb-0002";
const CLUSTER_SECRET: &str = "cluster-secret-cccc-0003";
const UNNAMED_ADMIN: &str = "unnamed-admin-dddd-0004";
const VIEWER_KEY: &str = "viewer-key-eeee-0005";
const OPERATOR_KEY: &str = "operator-key-ffff-0006";
const METRICS_TOKEN: &str = "metrics-token-gggg-0007";

const SECRETS: [&str; 7] = [
    TENANT_KEY,
    OTHER_TENANT_KEY,
    CLUSTER_SECRET,
    UNNAMED_ADMIN,
    VIEWER_KEY,
    OPERATOR_KEY,
    METRICS_TOKEN,
];

/// Every GET route of the admin API and the open endpoints.
const READ_ROUTES: [&str; 15] = [
    "/admin/workers",
    "/admin/config",
    "/admin/config/audit",
    "/admin/admission",
    "/admin/warmup",
    "/admin/degradation",
    "/admin/cluster",
    "/admin/quota",
    "/admin/quota/audit",
    "/admin/overrides",
    "/admin/ledger/local",
    "/metrics",
    "/v1/models",
    "/health",
    "/ready",
];

fn assert_no_secret(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(
            !text.contains(secret),
            "{what} carries the secret `{secret}`: {text}"
        );
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn secret_config(sims: &[switchyard_sim::SimWorker], audit_path: &str) -> Config {
    let mut config = config_for(sims, "round_robin");
    config.admission = serde_json::from_value(json!({"tenants": [
        {"api_key": TENANT_KEY, "caller": "team-a", "tokens_per_day": 1_000_000},
        {"api_key": OTHER_TENANT_KEY, "caller": "team-b"},
    ]}))
    .unwrap();
    config.cluster.secret = CLUSTER_SECRET.into();
    config.admin.keys = vec![
        named_admin_key("vera", VIEWER_KEY, AdminRole::Viewer),
        named_admin_key("oscar", OPERATOR_KEY, AdminRole::Operator),
    ];
    config.listener = ListenerConfig {
        metrics_token: METRICS_TOKEN.into(),
        ..ListenerConfig::default()
    };
    config.server.audit_log_path = Some(audit_path.into());
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_an_admin_response_the_audit_log_or_a_log_line() {
    let logs = Captured::default();
    let sink = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(
            "info,switchyard_gateway=trace,switchyard_admission=trace,switchyard_ledger=debug,switchyard_workers=debug",
        ))
        .with_ansi(false)
        .with_writer(move || sink.clone())
        .init();

    let sims = start_sims(1).await;
    let dir = tempfile::tempdir().unwrap();
    let audit_path = dir.path().join("audit.jsonl");
    let config = secret_config(&sims, audit_path.to_str().unwrap());
    let gateway = start_with(
        config,
        StartOptions {
            admin_key: Some(UNNAMED_ADMIN.into()),
            ..StartOptions::default()
        },
    )
    .await
    .unwrap();
    let base = gateway.base_url();

    // Traffic: a served request, a wrong key, a keyless one.
    let url = format!("{base}/v1/chat/completions");
    let body = chat("sim-llama", "hello", false).to_string();
    let ok = send(
        Method::POST,
        &url,
        &[("authorization", &format!("Bearer {TENANT_KEY}"))],
        body.clone(),
    )
    .await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    let wrong = send(
        Method::POST,
        &url,
        &[("authorization", "Bearer sk-tenant-secret-aaaa-0009")],
        body.clone(),
    )
    .await;
    assert_eq!(wrong.status, 401);
    assert_no_secret("a 401", &wrong.body);

    // Config changes: one applied, one refused as restart-only (it names secret fields),
    // one refused as invalid.
    let applied = admin_call(
        &base,
        OPERATOR_KEY,
        Method::PUT,
        "/admin/config",
        json!({"set": {"retry.max_retries": 1}, "reason": "calm"}),
    )
    .await;
    assert_eq!(applied.status, 200, "{}", applied.body);
    for (path, value) in [
        ("cluster.secret", json!("cluster-secret-rotated-0008")),
        (
            "admission.tenants",
            json!([{"api_key": "sk-tenant-secret-new-0010", "caller": "team-c"}]),
        ),
        ("admin.api_key", json!("unnamed-admin-rotated-0011")),
    ] {
        let refused = admin_call(
            &base,
            OPERATOR_KEY,
            Method::PUT,
            "/admin/config",
            json!({"set": {path: value}}),
        )
        .await;
        assert_eq!(refused.status, 409, "{path}: {}", refused.body);
        assert_no_secret("a refused change", &refused.body);
        for rotated in ["rotated-0008", "new-0010", "rotated-0011"] {
            assert!(!refused.body.contains(rotated), "{}", refused.body);
        }
    }

    // Every read, as viewer and as admin.
    for key in [VIEWER_KEY, UNNAMED_ADMIN, METRICS_TOKEN] {
        for route in READ_ROUTES {
            let reply = admin_call(&base, key, Method::GET, route, Value::Null).await;
            assert_no_secret(&format!("GET {route}"), &reply.body);
        }
    }
    let open = send(Method::GET, &format!("{base}/metrics"), &[], "").await;
    assert_eq!(open.status, 401, "/metrics needs its token");
    let wrong = admin_call(&base, VIEWER_KEY, Method::GET, "/metrics", Value::Null).await;
    assert_eq!(wrong.status, 401);
    let metrics = admin_call(&base, METRICS_TOKEN, Method::GET, "/metrics", Value::Null).await;
    assert_eq!(metrics.status, 200);
    let config = admin_call(&base, VIEWER_KEY, Method::GET, "/admin/config", Value::Null).await;
    assert_eq!(config.status, 200, "{}", config.body);
    let config = config.json();
    assert_eq!(config["cluster"]["secret"], "<redacted>");
    assert_eq!(config["admission"]["tenants"][0]["api_key"], "<redacted>");
    assert_eq!(config["admin"]["keys"][0]["key"], "<redacted>");
    assert_eq!(config["listener"]["metrics_token"], "<redacted>");

    let audit = admin_call(
        &base,
        VIEWER_KEY,
        Method::GET,
        "/admin/config/audit",
        Value::Null,
    )
    .await;
    let entries = audit.json()["entries"].as_array().unwrap().clone();
    assert!(
        entries.iter().any(|e| e["changes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["path"] == "cluster.secret")),
        "the refused secret change is audited by path: {entries:?}"
    );
    for rotated in ["rotated-0008", "new-0010", "rotated-0011"] {
        assert!(!audit.body.contains(rotated), "{}", audit.body);
    }
    let file = std::fs::read_to_string(&audit_path).unwrap();
    assert!(file.lines().count() >= 4, "{file}");
    assert_no_secret("the audit file", &file);
    for rotated in ["rotated-0008", "new-0010", "rotated-0011"] {
        assert!(!file.contains(rotated), "{file}");
    }

    gateway.shutdown().await;
    let logs = String::from_utf8_lossy(&logs.0.lock()).into_owned();
    assert!(
        logs.contains("switchyard gateway listening"),
        "the log capture works"
    );
    assert_no_secret("the logs", &logs);
}

/// Walks the config schema: every string field whose name suggests a credential must be a
/// `Secret` (serialised as `<redacted>`); a new plain `String` credential field fails here.
#[test]
fn every_credential_field_of_the_config_is_redacted() {
    let sims: Vec<switchyard_sim::SimWorker> = Vec::new();
    let config = secret_config(&sims, "/tmp/unused");
    let mut tree = switchyard_core::with_secrets_exposed(|| serde_json::to_value(&config)).unwrap();
    let mut planted = Vec::new();
    plant("", &mut tree, &mut planted);
    assert!(
        planted.len() >= 6,
        "tenant keys, admin keys, cluster secret and metrics token are walked: {planted:?}"
    );
    let planted_config: Config = serde_json::from_value(tree).unwrap();
    let shown = serde_json::to_string(&planted_config).unwrap();
    for path in &planted {
        assert!(
            !shown.contains(&format!("canary:{path}")),
            "`{path}` is serialised in clear: make it a switchyard_core::Secret"
        );
    }
    let debug = format!("{planted_config:?}");
    assert!(!debug.contains("canary:"), "Debug shows a secret: {debug}");
}

fn looks_like_a_credential(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    // A file path (`tls_key_path`) names where a secret lives, not the secret.
    if name.ends_with("_path") {
        return false;
    }
    ["key", "secret", "token", "password", "credential"]
        .iter()
        .any(|word| name.contains(word))
}

fn plant(path: &str, node: &mut Value, planted: &mut Vec<String>) {
    match node {
        Value::Object(fields) => {
            for (name, value) in fields.iter_mut() {
                let child = format!("{path}.{name}");
                if value.is_string() && looks_like_a_credential(name) {
                    *value = Value::String(format!("canary:{child}-0123456789abcdef"));
                    planted.push(child);
                } else {
                    plant(&child, value, planted);
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                plant(&format!("{path}[{i}]"), item, planted);
            }
        }
        _ => {}
    }
}
