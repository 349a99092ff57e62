#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What a gateway writes into its (here one-node) ledger at start-up from its config: the
//! tenants' period budgets carrying their rate and concurrency limits as fleet-wide figures,
//! and the audit retention of `[cluster] audit_retention_entries`.

mod common;

use common::*;
use http::Method;
use serde_json::{Value, json};
use switchyard_gateway::config::AdmissionConfig;

async fn admin_get(base: &str, path: &str) -> Value {
    let reply = send(
        Method::GET,
        &format!("{base}{path}"),
        &[("authorization", &format!("Bearer {ADMIN_KEY}"))],
        "",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()
}

fn budget_of<'a>(quota: &'a Value, caller: &str) -> Option<&'a Value> {
    quota["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["scope"].to_string().contains(&format!("\"{caller}\"")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_rate_and_concurrency_limits_are_seeded_into_the_fleet_budget() {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.admission = serde_json::from_value::<AdmissionConfig>(json!({
        "tenants": [
            {"api_key": "sk-a", "caller": "team-a", "tokens_per_day": 1_000_000,
             "tokens_per_month": 9_000_000, "tokens_per_minute": 6_000, "max_in_flight": 7},
            {"api_key": "sk-b", "caller": "team-b", "tokens_per_minute": 600,
             "peak_in_flight": 10},
            {"api_key": "sk-c", "caller": "team-c", "tokens_per_month": 5_000_000},
            {"api_key": "sk-d", "caller": "team-d"}
        ]
    }))
    .unwrap();
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let quota = admin_get(&base, "/admin/quota").await;

    // Period budget plus the fleet-wide rate (6 000/min x bucket_rate_factor 0.9 = 90/s) and
    // concurrency on the day limit; the month limit is a second fleet-wide pool of the scope.
    let a = &budget_of(&quota, "team-a").expect("team-a seeded")["spec"];
    assert_eq!(a["limit_tokens"], 1_000_000, "{a}");
    assert_eq!(a["period_ms"], 24 * 3600 * 1000, "{a}");
    assert_eq!(a["rate_tokens_per_s"], 90, "{a}");
    assert_eq!(a["max_concurrency"], 7, "{a}");
    let a_pools: Vec<&Value> = quota["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["scope"]["caller"] == "team-a")
        .collect();
    assert_eq!(a_pools.len(), 2, "{quota}");
    assert_eq!(a_pools[1]["spec"]["limit_tokens"], 9_000_000, "{quota}");
    assert_eq!(
        a_pools[1]["spec"]["period_ms"],
        30u64 * 24 * 3600 * 1000,
        "{quota}"
    );

    // A rate without a period budget still gets a fleet-wide budget to carry it: a day of
    // that rate (600 x 1440), rate 600 x 0.9 / 60 = 9/s, concurrency 10 x peak_factor 0.7.
    let b = &budget_of(&quota, "team-b").expect("team-b seeded")["spec"];
    assert_eq!(b["limit_tokens"], 600 * 1440, "{b}");
    assert_eq!(b["rate_tokens_per_s"], 9, "{b}");
    assert_eq!(b["max_concurrency"], 7, "{b}");

    // A period budget alone: no rate, no concurrency cap (0 = unlimited).
    let c = &budget_of(&quota, "team-c").expect("team-c seeded")["spec"];
    assert_eq!(c["limit_tokens"], 5_000_000, "{c}");
    assert_eq!(c["period_ms"], 30u64 * 24 * 3600 * 1000, "{c}");
    assert_eq!(c["rate_tokens_per_s"], 0, "{c}");
    assert_eq!(c["max_concurrency"], 0, "{c}");

    assert!(
        budget_of(&quota, "team-d").is_none(),
        "no limits, no budget: {quota}"
    );

    // The replica's lease carries a share of the seeded rate: the ledger enforces it.
    let node = gateway.state().cluster.clone().unwrap();
    let share = node
        .quota()
        .leases()
        .share_snapshot(&switchyard_core::QuotaScope::caller("team-a"));
    let (rate_share, concurrency_share, _) = share.expect("team-a holds a lease");
    assert!((1..=90).contains(&rate_share), "{rate_share}");
    assert!((1..=7).contains(&concurrency_share), "{concurrency_share}");
    gateway.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_audit_retention_is_proposed_at_start_up_and_bounds_the_log() {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.cluster.audit_retention_entries = 4;
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let node = gateway.state().cluster.clone().unwrap();
    assert_eq!(
        node.with_applied_state(|s| s.overrides.audit_retention()),
        4
    );
    let audit = admin_get(&base, "/admin/quota/audit").await;
    let entries = audit["entries"].as_array().unwrap();
    let change = entries
        .iter()
        .find(|e| e["action"] == "AuditRetentionSet")
        .unwrap_or_else(|| panic!("the change is audited: {audit}"));
    assert_eq!(change["principal"], "config");

    for i in 0..10 {
        let reply = send(
            Method::PUT,
            &format!("{base}/admin/quota"),
            &[
                ("authorization", &format!("Bearer {ADMIN_KEY}")),
                ("content-type", "application/json"),
            ],
            json!({"caller": format!("c{i}"), "tokens_per_day": 1_000}).to_string(),
        )
        .await;
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let audit = admin_get(&base, "/admin/quota/audit").await;
    let seqs: Vec<u64> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs.len(), 4, "{audit}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert_eq!(audit["oldest_retained_seq"], seqs[0]);
    gateway.shutdown().await;
}
