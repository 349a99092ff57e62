#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Three real gateway processes forming one Raft group: joining, the two-person override
//! rule through the API of different replicas, and one global budget across replicas.

mod common;

use common::*;
use http::Method;
use std::time::Duration;

const ALICE: &str = "alice-key-0123456789";
const BOB: &str = "bob-key-0123456789ab";

#[tokio::test]
async fn three_replicas_share_one_budget_and_enforce_the_two_person_rule() {
    // Each answer reports 3 + 8 = 11 tokens, the same as the admission estimate for
    // "hi" with max_tokens 8, so the budget counts whole requests.
    let body = format!(
        r#"
[admin]
keys = [{{ name = "alice", key = "{ALICE}" }}, {{ name = "bob", key = "{BOB}" }}]

[[admission.tenants]]
api_key = "sk-a"
caller = "team-a"
max_priority = "P1"
tokens_per_day = 110
"#
    );
    let group = ReplicaGroup::start((3, 8), "test-cluster-secret", &body).await;
    let bases = &group.bases;

    let formed = eventually(Duration::from_secs(30), || async {
        let status = admin_get(&bases[0], ALICE, "/admin/cluster").await;
        status.status == 200
            && status.json()["voters"]
                .as_array()
                .is_some_and(|v| v.len() == 3)
    })
    .await;
    assert!(formed, "three voters");

    // Two-person rule, across replicas.
    let proposed = admin_call(
        &bases[1],
        ALICE,
        Method::POST,
        "/admin/overrides",
        serde_json::json!({"caller": "team-a", "extra_tokens": 1000, "reason": "launch day", "duration_secs": 600}),
    )
    .await;
    assert_eq!(proposed.status, 200, "{}", proposed.body);
    let id = proposed.json()["proposed"].as_u64().unwrap();
    let self_approval = admin_call(
        &bases[2],
        ALICE,
        Method::POST,
        &format!("/admin/overrides/{id}/approve"),
        serde_json::Value::Null,
    )
    .await;
    assert_eq!(
        self_approval.status, 409,
        "the requester cannot approve: {}",
        self_approval.body
    );
    let too_long = admin_call(
        &bases[0],
        ALICE,
        Method::POST,
        "/admin/overrides",
        serde_json::json!({"caller": "team-a", "extra_tokens": 1, "reason": "x", "duration_secs": 7201}),
    )
    .await;
    assert_eq!(too_long.status, 400);
    let revoke = admin_call(
        &bases[0],
        BOB,
        Method::DELETE,
        &format!("/admin/overrides/{id}"),
        serde_json::json!({"reason": "not needed"}),
    )
    .await;
    assert_eq!(revoke.status, 200, "{}", revoke.body);
    let listed = admin_get(&bases[0], BOB, "/admin/overrides").await;
    assert_eq!(listed.json()["overrides"][0]["requester"], "alice");

    // Wait until every replica has the budget (seeded from config by the first node up).
    let budgeted = eventually(Duration::from_secs(30), || async {
        let quota = admin_get(&bases[2], ALICE, "/admin/quota").await;
        quota.status == 200
            && quota.json()["budgets"]
                .as_array()
                .is_some_and(|b| !b.is_empty())
    })
    .await;
    assert!(budgeted);

    // 30 requests spread over the replicas against a budget of 10 requests' worth.
    let mut served = 0u64;
    let mut from_cache = 0u64;
    let mut refused = 0u64;
    for i in 0..30 {
        let reply = tenant_chat(&bases[i % 3], "sk-a", &chat("sim-llama", "hi", false)).await;
        match reply.status.as_u16() {
            200 => {
                served += 1;
                // A tenant close to its budget may be answered from the response cache (its own
                // earlier answer to the same request), marked degraded; only the rest reach the worker.
                if reply.header("x-switchyard-degraded").is_some() {
                    assert!(
                        reply.header("x-switchyard-cache-age").is_some(),
                        "{}",
                        reply.body
                    );
                    from_cache += 1;
                }
            }
            429 | 503 => {
                assert!(reply.header("retry-after").is_some(), "{}", reply.body);
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", reply.body),
        }
    }
    assert!(
        served * 11 <= 110,
        "the fleet admitted {} tokens of a 110-token budget",
        served * 11
    );
    assert!(served >= 3, "the budget is usable: only {served} served");
    assert_eq!(served + refused, 30);
    let forwarded = group
        .worker
        .heads
        .lock()
        .iter()
        .filter(|h| h.starts_with("post"))
        .count() as u64;
    assert_eq!(forwarded, served - from_cache);
    assert!(forwarded >= 3, "only {forwarded} reached the worker");
}
