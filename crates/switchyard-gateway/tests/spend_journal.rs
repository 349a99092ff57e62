#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Crash-safe leases with real processes: a replica serving a tenant is killed with SIGKILL
//! while requests are in flight and restarted on its data dir. Every token acknowledged
//! before the kill stays counted, and the restarted replica reports its dead lease from its
//! spend journal, so the ledger gives back what the lease had not spent instead of keeping it
//! charged in full.

mod common;

use common::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const TENANTS: &str = r#"
# Spend up to the whole limit: this test is about the ledger, not graded shedding.
[admission.gates]
soft_limit = 1.0
hard_limit = 1.0

[[admission.tenants]]
api_key = "sk-journal"
caller = "team-journal"
max_priority = "P1"
tokens_per_day = 2000000
"#;

/// Tokens per answer: the capture worker reports 3 prompt + 8 completion tokens.
const TOKENS_PER_ANSWER: u64 = 11;

async fn quota(base: &str) -> serde_json::Value {
    let reply = admin_get(base, ADMIN_KEY, "/admin/quota").await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["scope"]["caller"] == "team-journal")
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_replica_reports_its_lease_from_the_journal_after_restart() {
    let worker = CaptureWorker::start((3, 8)).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("switchyard.toml");
    let text = group_config("test-cluster-secret", TENANTS, &worker.url);
    std::fs::write(&config, text).unwrap();
    let rafts: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let mut all_args = Vec::new();
    for id in 1..=3u64 {
        let data = dir.path().join(format!("node{id}"));
        let join = (id > 1).then_some(rafts[0].as_str());
        all_args.push(replica_args(
            &config,
            id,
            &rafts[id as usize - 1],
            &data,
            join,
        ));
    }
    let mut nodes = Vec::new();
    for args in &all_args {
        nodes.push(GatewayProcess::spawn_with(args).await);
    }
    let bases: Vec<String> = nodes.iter().map(|n| n.base_url.clone()).collect();
    for base in &bases {
        let seeded = eventually(Duration::from_secs(30), || async {
            quota(base).await["leases"]
                .as_array()
                .is_some_and(|l| l.len() == 3)
        })
        .await;
        assert!(seeded, "budget not seeded or leases not held on {base}");
    }

    // Four clients keep node 3 busy; it is killed while they run.
    let victim = bases[2].clone();
    let acked = Arc::new(AtomicU64::new(0));
    let mut clients = Vec::new();
    for _ in 0..4 {
        let (victim, acked) = (victim.clone(), acked.clone());
        clients.push(tokio::spawn(async move {
            for _ in 0..150 {
                let reply =
                    tenant_chat(&victim, "sk-journal", &chat("sim-llama", "hi", false)).await;
                assert_eq!(reply.status, 200, "{}", reply.body);
                acked.fetch_add(TOKENS_PER_ANSWER, Ordering::SeqCst);
            }
        }));
    }
    let busy = eventually(Duration::from_secs(60), || async {
        acked.load(Ordering::SeqCst) >= 200 * TOKENS_PER_ANSWER
    })
    .await;
    assert!(busy, "node 3 did not serve");
    nodes[2].child.start_kill().unwrap(); // SIGKILL
    nodes[2].child.wait().await.unwrap();
    for client in clients {
        // Requests in flight at the kill fail; the clients stop there.
        let _ = client.await;
    }
    let acked = acked.load(Ordering::SeqCst);

    let restarted = GatewayProcess::spawn_with(&all_args[2]).await;
    let reported = eventually(Duration::from_secs(30), || async {
        metric(
            &metrics_text(&restarted.base_url).await,
            "switchyard_ledger_journal_reclaims_total",
        ) >= 1
    })
    .await;
    assert!(reported, "the restarted replica did not report its lease");
    let came_back = eventually(Duration::from_secs(10), || async {
        metric(
            &metrics_text(&bases[0]).await,
            "switchyard_ledger_applied_reclaimed_tokens",
        ) > 0
    })
    .await;
    let reclaimed = metric(
        &metrics_text(&bases[0]).await,
        "switchyard_ledger_applied_reclaimed_tokens",
    );
    let after = quota(&bases[0]).await;
    let spent = after["spent"].as_u64().unwrap();
    let debt = after["spec"]["max_debt_tokens"].as_u64().unwrap();
    eprintln!(
        "FIGURE SIGKILL under load: acknowledged {acked} tokens, spent after restart {spent} \
         (stranded {}), given back {reclaimed}, debt allowance {debt}",
        spent.saturating_sub(acked)
    );
    assert!(
        spent >= acked,
        "acknowledged spend lost: spent {spent} < acknowledged {acked}"
    );
    assert!(
        came_back,
        "nothing of the dead lease came back: spent {spent}, acknowledged {acked}"
    );
    // Without the journal the dead lease would be charged in full: its whole grant plus
    // the debt allowance. With it, what stays charged above the acknowledged spend is at
    // most a journal step (a quarter of a grant), the debt allowance, and the requests cut
    // off in flight or answered as the kill came.
    let granted = spent + reclaimed - debt;
    let bound = acked + granted / 4 + debt + 9 * TOKENS_PER_ANSWER;
    assert!(
        spent <= bound,
        "spent {spent} above the journal's bound {bound}"
    );
    let committed = after["committed"].as_u64().unwrap();
    assert!(committed <= after["spec"]["limit_tokens"].as_u64().unwrap());
    drop(restarted);
    drop(nodes);
}
