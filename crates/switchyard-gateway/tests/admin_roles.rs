#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Roles of named admin keys, through the HTTP API: viewers read, operators run the fleet and
//! propose overrides, approvers approve and revoke, admins do everything; the ledger still
//! refuses a requester approving their own override.

mod common;

use common::*;
use http::Method;
use switchyard_gateway::config::AdminRole;

const VIEWER: &str = "vera-viewer-key-0001";
const OPERATOR: &str = "oscar-operator-key-01";
const APPROVER: &str = "april-approver-key-01";
const ADMIN: &str = "adam-admin-key-000001";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_may_do_only_what_it_is_for() {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.admin.keys = vec![
        named_admin_key("vera", VIEWER, AdminRole::Viewer),
        named_admin_key("oscar", OPERATOR, AdminRole::Operator),
        named_admin_key("april", APPROVER, AdminRole::Approver),
        named_admin_key("adam", ADMIN, AdminRole::default()),
    ];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let base = gateway.base_url();
    let budget = serde_json::json!({"caller": "team-a", "tokens_per_day": 100000});
    let proposal = serde_json::json!({
        "caller": "team-a", "extra_tokens": 500, "reason": "launch", "duration_secs": 600
    });
    let null = serde_json::Value::Null;

    // Viewer: reads, nothing else; the config it reads shows no key.
    for path in [
        "/admin/workers",
        "/admin/quota",
        "/admin/overrides",
        "/admin/quota/audit",
    ] {
        let reply = admin_call(&base, VIEWER, Method::GET, path, null.clone()).await;
        assert_eq!(reply.status, 200, "viewer GET {path}: {}", reply.body);
    }
    let config = admin_call(&base, VIEWER, Method::GET, "/admin/config", null.clone()).await;
    assert_eq!(config.status, 200);
    for secret in [VIEWER, OPERATOR, APPROVER, ADMIN] {
        assert!(
            !config.body.contains(secret),
            "a key leaked into GET /admin/config"
        );
    }
    let reply = admin_call(&base, VIEWER, Method::PUT, "/admin/quota", budget.clone()).await;
    assert_insufficient_role(&reply, "viewer");
    let reply = admin_call(
        &base,
        VIEWER,
        Method::POST,
        "/admin/overrides",
        proposal.clone(),
    )
    .await;
    assert_insufficient_role(&reply, "viewer");
    let reply = admin_call(
        &base,
        VIEWER,
        Method::DELETE,
        "/admin/workers/sim-0",
        null.clone(),
    )
    .await;
    assert_insufficient_role(&reply, "viewer");

    // Operator: quotas, proposals, config; not approvals, not membership.
    let reply = admin_call(&base, OPERATOR, Method::PUT, "/admin/quota", budget.clone()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["by"], "oscar");
    let change = serde_json::json!({"set": {"retry.max_retries": 1}, "reason": "test"});
    let reply = admin_call(&base, OPERATOR, Method::PUT, "/admin/config", change).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = admin_call(
        &base,
        OPERATOR,
        Method::POST,
        "/admin/overrides",
        proposal.clone(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let id = reply.json()["proposed"].as_u64().unwrap();
    let approve = format!("/admin/overrides/{id}/approve");
    let reply = admin_call(&base, OPERATOR, Method::POST, &approve, null.clone()).await;
    assert_insufficient_role(&reply, "operator");
    let member = serde_json::json!({"id": 9, "addr": "127.0.0.1:1"});
    let reply = admin_call(
        &base,
        OPERATOR,
        Method::POST,
        "/admin/cluster/members",
        member.clone(),
    )
    .await;
    assert_insufficient_role(&reply, "operator");

    // Approver: approves (a different principal), cannot set quotas or propose.
    let reply = admin_call(&base, APPROVER, Method::PUT, "/admin/quota", budget.clone()).await;
    assert_insufficient_role(&reply, "approver");
    let reply = admin_call(
        &base,
        APPROVER,
        Method::POST,
        "/admin/overrides",
        proposal.clone(),
    )
    .await;
    assert_insufficient_role(&reply, "approver");
    let reply = admin_call(&base, APPROVER, Method::POST, &approve, null.clone()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["approver"], "april");

    // Admin: everything, but the ledger still refuses approving one's own proposal.
    let reply = admin_call(
        &base,
        ADMIN,
        Method::POST,
        "/admin/overrides",
        proposal.clone(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let own = reply.json()["proposed"].as_u64().unwrap();
    let own_approval = format!("/admin/overrides/{own}/approve");
    let reply = admin_call(&base, ADMIN, Method::POST, &own_approval, null.clone()).await;
    assert_eq!(reply.status, 409, "requester = approver: {}", reply.body);
    let reply = admin_call(
        &base,
        APPROVER,
        Method::DELETE,
        &format!("/admin/overrides/{own}"),
        null,
    )
    .await;
    assert_eq!(reply.status, 200, "an approver revokes: {}", reply.body);

    // The audit log names every principal and says which entries it still holds.
    let audit = admin_call(
        &base,
        VIEWER,
        Method::GET,
        "/admin/quota/audit",
        serde_json::Value::Null,
    )
    .await
    .json();
    assert_eq!(audit["oldest_retained_seq"], 1);
    let principals: Vec<&str> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["principal"].as_str())
        .collect();
    for who in ["oscar", "april", "adam"] {
        assert!(
            principals.contains(&who),
            "{who} missing from {principals:?}"
        );
    }
}

#[test]
fn an_unknown_role_is_refused_at_start_up_with_its_field() {
    let text = r#"
        [admin]
        keys = [
          { name = "alice", key = "alice-key-0123456789" },
          { name = "bob", key = "bob-key-0123456789xx", role = "superuser" },
        ]
    "#;
    let error = switchyard_gateway::Config::parse(text)
        .unwrap_err()
        .to_string();
    assert!(error.contains("admin.keys[1].role"), "{error}");
    assert!(error.contains("superuser"), "{error}");
    let fine = text.replace("superuser", "approver");
    let config = switchyard_gateway::Config::parse(&fine).unwrap();
    assert_eq!(
        config.admin.keys[0].role,
        AdminRole::Admin,
        "absent role = admin"
    );
    assert_eq!(config.admin.keys[1].role, AdminRole::Approver);
}
