#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Every configured period limit holds across three real replicas, not once per replica: a
//! month limit next to a much larger day limit, and a purpose-scoped day limit. Also: a
//! replica of a group refuses to start without a data dir, or on another node's data dir.

mod common;

use common::*;
use std::time::Duration;

const TENANTS: &str = r#"
# Spend up to the whole limit: this test is about the ledger, not graded shedding.
[admission.gates]
soft_limit = 1.0
hard_limit = 1.0

[[admission.tenants]]
api_key = "sk-month"
caller = "team-month"
max_priority = "P1"
tokens_per_day = 1000000
tokens_per_month = 110

[[admission.tenants]]
api_key = "sk-purpose"
caller = "team-purpose"
max_priority = "P1"

[[admission.tenants.purposes]]
purpose = "business"
tokens_per_day = 110
"#;

/// Sends `n` requests of `key` round-robin over the replicas; answers how many were served.
async fn spend(bases: &[String], key: &str, n: usize) -> u64 {
    let mut served = 0;
    for i in 0..n {
        let reply = tenant_chat(
            &bases[i % bases.len()],
            key,
            &chat("sim-llama", "hi", false),
        )
        .await;
        match reply.status.as_u16() {
            200 => served += 1,
            // Refused by the ledger (no lease left) or, once this replica has applied the
            // spend, already by the budget gate's graded shedding (past the 100 % hard limit):
            // both are the limit holding.
            429 => assert!(
                matches!(
                    reply.error_code().as_str(),
                    "budget_exhausted" | "budget_hard_limit"
                ),
                "{}",
                reply.body
            ),
            other => panic!("unexpected {other}: {}", reply.body),
        }
    }
    served
}

#[tokio::test]
async fn month_and_purpose_limits_hold_across_three_replicas() {
    // 3 + 8 = 11 tokens per answer, the admission estimate of "hi" with max_tokens 8:
    // each 110-token limit is 10 requests.
    let group = ReplicaGroup::start((3, 8), "test-cluster-secret", TENANTS).await;
    let bases = &group.bases;
    // Every replica lists the three pools: the day and month budgets of team-month and the
    // business budget of team-purpose.
    for base in bases {
        let seeded = eventually(Duration::from_secs(30), || async {
            let quota = admin_get(base, ADMIN_KEY, "/admin/quota").await;
            quota.status == 200
                && quota.json()["budgets"]
                    .as_array()
                    .is_some_and(|b| b.len() == 3)
        })
        .await;
        assert!(seeded, "budgets not seeded on {base}");
    }

    let month = spend(bases, "sk-month", 30).await;
    assert!(month <= 10, "a 10-request month limit served {month}");
    assert!(month >= 8, "the month limit is usable: only {month} served");

    let purpose = spend(bases, "sk-purpose", 30).await;
    assert!(purpose <= 10, "a 10-request purpose limit served {purpose}");
    assert!(
        purpose >= 8,
        "the purpose limit is usable: only {purpose} served"
    );
    drop(group);
}

#[tokio::test]
async fn a_replica_of_a_group_needs_its_own_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(
        &path,
        "[cluster]\nsecret = \"a-cluster-secret-of-some-length\"\n",
    )
    .unwrap();
    let (code, stderr) = run_to_exit(&[
        "serve",
        "--config",
        path.to_str().unwrap(),
        "--node-id",
        "2",
        "--join",
        "127.0.0.1:9",
    ])
    .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("cluster.data_dir"), "{stderr}");

    // A data dir first used by node 1 refuses node 2.
    let data = dir.path().join("data");
    let first = GatewayProcess::spawn(&[
        "--config",
        path.to_str().unwrap(),
        "--node-id",
        "1",
        "--data-dir",
        data.to_str().unwrap(),
    ])
    .await;
    drop(first);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (code, stderr) = run_to_exit(&[
        "serve",
        "--config",
        path.to_str().unwrap(),
        "--node-id",
        "2",
        "--port",
        "0",
        "--data-dir",
        data.to_str().unwrap(),
    ])
    .await;
    assert_ne!(code, 0);
    assert!(stderr.contains("node id 1"), "{stderr}");
}
