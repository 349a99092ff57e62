#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Roles on the warmup, degradation and chaos endpoints: a viewer reads warmup and
//! degradation status but may not force a level or run a drill; an operator may; the chaos
//! read stays admin-only.

mod common;

use common::*;
use http::Method;
use switchyard_gateway::config::AdminRole;

const VIEWER: &str = "vera-viewer-key-0001";
const OPERATOR: &str = "oscar-operator-key-01";
const ADMIN: &str = "adam-admin-key-000001";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_reads_warmup_and_degradation_but_may_not_change_them() {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.admin.keys = vec![
        named_admin_key("vera", VIEWER, AdminRole::Viewer),
        named_admin_key("oscar", OPERATOR, AdminRole::Operator),
        named_admin_key("adam", ADMIN, AdminRole::Admin),
    ];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let base = gateway.base_url();
    let null = serde_json::Value::Null;

    for path in ["/admin/warmup", "/admin/degradation"] {
        let reply = admin_call(&base, VIEWER, Method::GET, path, null.clone()).await;
        assert_eq!(reply.status, 200, "viewer GET {path}: {}", reply.body);
        assert!(reply.json().is_object(), "{}", reply.body);
    }

    let force = serde_json::json!({"level": 1, "reason": "viewer tries"});
    let refused = admin_call(&base, VIEWER, Method::PUT, "/admin/degradation", force).await;
    assert_insufficient_role(&refused, "viewer");
    let drill = serde_json::json!({"level": 1});
    let refused = admin_call(
        &base,
        VIEWER,
        Method::POST,
        "/admin/degradation/drill",
        drill,
    )
    .await;
    assert_insufficient_role(&refused, "viewer");
    let status = admin_call(
        &base,
        VIEWER,
        Method::GET,
        "/admin/degradation",
        null.clone(),
    )
    .await;
    assert!(
        !status.body.contains("viewer tries"),
        "a refused change must not reach the audit trail: {}",
        status.body
    );

    // An operator may change the level (here: hand control back to the signals).
    let release = serde_json::json!({"release": true, "reason": "operator releases"});
    let released = admin_call(&base, OPERATOR, Method::PUT, "/admin/degradation", release).await;
    assert_eq!(released.status, 200, "{}", released.body);

    // The chaos suite's raw state read is for admins only.
    let chaos = admin_call(
        &base,
        VIEWER,
        Method::GET,
        "/admin/ledger/local",
        null.clone(),
    )
    .await;
    assert_insufficient_role(&chaos, "viewer");
    let chaos = admin_call(
        &base,
        OPERATOR,
        Method::GET,
        "/admin/ledger/local",
        null.clone(),
    )
    .await;
    assert_insufficient_role(&chaos, "operator");
    let chaos = admin_call(&base, ADMIN, Method::GET, "/admin/ledger/local", null).await;
    assert_eq!(chaos.status, 200, "{}", chaos.body);
    // The test-only writes do not exist without SWITCHYARD_CHAOS_ENDPOINTS=1, even for admins.
    let stall = serde_json::json!({"stall_ms": 1500, "for_ms": 300});
    let chaos = admin_call(&base, ADMIN, Method::PUT, "/admin/chaos/flush-stall", stall).await;
    assert_eq!(chaos.status, 404, "{}", chaos.body);
    assert_eq!(
        chaos.error_code(),
        "chaos_endpoints_disabled",
        "{}",
        chaos.body
    );

    gateway.shutdown().await;
}
