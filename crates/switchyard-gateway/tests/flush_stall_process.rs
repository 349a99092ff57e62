#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Three real gateway processes share one tenant's budget while their disks stall: five
//! episodes 2.5 s apart in which every Raft log flush that starts within 300 ms sleeps 1.5 s
//! on every replica (`PUT /admin/chaos/flush-stall`), under load spread over the replicas.
//! Unpatched openraft 0.9 sends no heartbeat while its core awaits a flush, so a 1.5 s stall
//! outlasts the followers' patience (1.2-1.6 s) and deposes a live leader; the vendored copy
//! keeps heartbeating (for at most 5 × `election_timeout_max`, 4 s by default). Asserted: the
//! Raft term is unchanged on every replica, and no request was answered 503.
//!
//! The ignored test runs the same episodes with a 6 s stall, past that bound, and asserts
//! the opposite (an election): proof that the first test's checks can see one.

mod common;

use common::*;
use http::Method;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const TENANT_KEY: &str = "sk-flush-stall-tenant";
const EPISODES: u32 = 5;
const EPISODE_GAP: Duration = Duration::from_millis(2500);
const WINDOW_MS: u64 = 300;

async fn cluster_view(base: &str) -> Option<serde_json::Value> {
    let reply = admin_get(base, ADMIN_KEY, "/admin/cluster").await;
    (reply.status == 200).then(|| reply.json())
}

/// (term, leader) as `base` sees them.
async fn term_and_leader(base: &str) -> Option<(u64, u64)> {
    let view = cluster_view(base).await?;
    Some((view["term"].as_u64()?, view["leader"].as_u64()?))
}

/// The seconds this replica's Raft log flushes took in all (the stalls included).
async fn flush_seconds(base: &str) -> f64 {
    let text = metrics_text(base).await;
    text.lines()
        .find_map(|line| line.strip_prefix("switchyard_ledger_log_flush_seconds_sum "))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no switchyard_ledger_log_flush_seconds_sum at {base}"))
}

async fn set_stall(base: &str, body: serde_json::Value) -> Reply {
    admin_call(
        base,
        ADMIN_KEY,
        Method::PUT,
        "/admin/chaos/flush-stall",
        body,
    )
    .await
}

/// Bad bodies and callers are refused with an OpenAI-shaped error; nothing is stalled.
async fn refuses_bad_stalls(base: &str) {
    let url = format!("{base}/admin/chaos/flush-stall");
    let anonymous = send(Method::PUT, &url, &[], r#"{"stall_ms": 10}"#).await;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    assert_eq!(anonymous.json()["error"]["type"], "authentication_error");
    let not_json = send(
        Method::PUT,
        &url,
        &[("authorization", &format!("Bearer {ADMIN_KEY}"))],
        "stall",
    )
    .await;
    assert_eq!(not_json.status, 400, "{}", not_json.body);
    for (body, says) in [
        (serde_json::json!({"stall_ms": "1500"}), "invalid body"),
        (serde_json::json!({"for_ms": 300}), "stall_ms"),
        (
            serde_json::json!({"stall_ms": 10, "every_ms": 1}),
            "every_ms",
        ),
        (serde_json::json!({"stall_ms": 60_001}), "at most 60000"),
        (
            serde_json::json!({"stall_ms": 0, "for_ms": 300}),
            "needs a stall_ms",
        ),
        (
            serde_json::json!({"stall_ms": 10, "for_ms": 0}),
            "at least 1",
        ),
        (
            serde_json::json!({"stall_ms": 10, "for_ms": 600_001}),
            "at most 600000",
        ),
    ] {
        let reply = set_stall(base, body.clone()).await;
        assert_eq!(reply.status, 400, "{body}: {}", reply.body);
        let error = &reply.json()["error"];
        assert_eq!(error["type"], "invalid_request_error", "{}", reply.body);
        assert_eq!(error["code"], "invalid_request", "{}", reply.body);
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(says), "{body}: {message}");
    }
    let cleared = set_stall(base, serde_json::json!({"stall_ms": 0})).await;
    assert_eq!(cleared.status, 200, "{}", cleared.body);
    assert_eq!(cleared.json()["stall_ms"], 0);
}

/// What a run of the stall episodes left behind.
struct Run {
    leader: usize,
    /// The status of each episode's ledger write through the leader.
    write_statuses: Vec<u16>,
    terms_before: Vec<u64>,
    terms_after: Vec<u64>,
    outcomes: BTreeMap<String, u64>,
    slowest: Duration,
    stalled_seconds: Vec<f64>,
    logs: String,
}

/// Forms the group, loads it through every replica, and runs the episodes with `stall_ms`.
async fn run_episodes(stall_ms: u64) -> Run {
    let body = far_from_spent_tenant(TENANT_KEY);
    let group = ReplicaGroup::start_env(
        (3, 60),
        "flush-stall-test-cluster-secret",
        &body,
        &[("SWITCHYARD_CHAOS_ENDPOINTS", "1")],
    )
    .await;
    let bases = group.bases.clone();
    let formed = eventually(Duration::from_secs(30), || async {
        cluster_view(&bases[0]).await.is_some_and(|view| {
            view["voters"].as_array().is_some_and(|v| v.len() == 3) && view["leader"].is_u64()
        })
    })
    .await;
    assert!(formed, "three voters and a leader");
    refuses_bad_stalls(&bases[0]).await;
    for base in &bases {
        let serving = eventually(Duration::from_secs(20), || async {
            ask_chat(base, TENANT_KEY).await.0 == 200
        })
        .await;
        assert!(serving, "{base} never served the tenant");
    }
    // Every replica follows the same leader in the same term before the first stall.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (terms_before, leader): (Vec<u64>, usize) = loop {
        let mut seen = Vec::new();
        for base in &bases {
            seen.push(term_and_leader(base).await);
        }
        if let Some((_, leader)) = seen[0]
            && seen.iter().all(|s| *s == seen[0])
        {
            let terms = seen.iter().flatten().map(|(term, _)| *term).collect();
            // spawn_three_replicas gives node ids 1, 2, 3 in order.
            break (terms, usize::try_from(leader - 1).unwrap());
        }
        assert!(
            Instant::now() < deadline,
            "the replicas never agreed on a leader and term: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // About 50 requests a second per client when answers are quick.
    let load = ChatLoad::start(&bases, 2, TENANT_KEY, Duration::from_millis(20));
    let mut flushed_before = Vec::new();
    for base in &bases {
        flushed_before.push(flush_seconds(base).await);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let started = tokio::time::Instant::now();
    let mut writes = Vec::new();
    for episode in 0..EPISODES {
        // One shared disk: every replica's flushes stall at once.
        let stalls = bases.iter().map(|base| {
            set_stall(
                base,
                serde_json::json!({"stall_ms": stall_ms, "for_ms": WINDOW_MS}),
            )
        });
        for reply in futures_util::future::join_all(stalls).await {
            assert_eq!(reply.status, 200, "{}", reply.body);
        }
        // A ledger write through the leader inside the window: its flush stalls for sure
        // (the load's own writes may fall between windows).
        let leader_base = bases[leader].clone();
        writes.push(tokio::spawn(async move {
            let body = serde_json::json!({"prefix_key": episode + 1, "worker": "w"});
            let path = "/admin/ledger/affinity";
            admin_call(&leader_base, ADMIN_KEY, Method::POST, path, body)
                .await
                .status
                .as_u16()
        }));
        tokio::time::sleep_until(started + EPISODE_GAP * (episode + 1)).await;
    }
    // The last stalled flushes end within stall_ms of the last episode; let them finish and
    // the leases they held up be renewed before judging.
    tokio::time::sleep(Duration::from_millis(stall_ms).max(EPISODE_GAP)).await;
    let mut write_statuses = Vec::new();
    for write in writes {
        write_statuses.push(write.await.unwrap());
    }
    let ChatLoadOutcome { outcomes, slowest } = load.finish().await;
    let mut terms_after = Vec::new();
    let mut stalled_seconds = Vec::new();
    for (base, before) in bases.iter().zip(&flushed_before) {
        let view = cluster_view(base).await.expect("cluster view");
        terms_after.push(view["term"].as_u64().unwrap());
        stalled_seconds.push(flush_seconds(base).await - before);
    }
    let logs = group
        .nodes
        .iter()
        .map(|n| n.log_tail())
        .collect::<Vec<_>>()
        .join("\n---\n");
    Run {
        leader,
        write_statuses,
        terms_before,
        terms_after,
        outcomes,
        slowest,
        stalled_seconds,
        logs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_whose_disks_stall_keep_their_leader_and_refuse_no_request() {
    let stall_ms = 1500;
    let run = run_episodes(stall_ms).await;
    eprintln!(
        "FIGURE {EPISODES} flush stalls of {stall_ms} ms: terms {:?} -> {:?}; answers {:?}; \
         slowest {:?}; flush seconds per replica during the episodes {:.1?} (leader: node {}); \
         ledger writes through the leader {:?}",
        run.terms_before,
        run.terms_after,
        run.outcomes,
        run.slowest,
        run.stalled_seconds,
        run.leader + 1,
        run.write_statuses
    );
    assert_eq!(
        run.terms_after, run.terms_before,
        "an election while the leader was only slow to flush\n{}",
        run.logs
    );
    // Every episode stalled at least one flush (the leader's write's), so an unchanged term
    // is not for want of stalls.
    let stalled: f64 = run.stalled_seconds.iter().sum();
    assert!(
        stalled >= Duration::from_millis(stall_ms).as_secs_f64() * f64::from(EPISODES),
        "the flushes were not stalled in every episode: {:?}",
        run.stalled_seconds
    );
    let refused: u64 = run
        .outcomes
        .iter()
        .filter(|(outcome, _)| outcome.starts_with("503"))
        .map(|(_, n)| n)
        .sum();
    assert_eq!(refused, 0, "503 answers: {:?}\n{}", run.outcomes, run.logs);
    let served = run.outcomes.get("200 ").copied().unwrap_or(0);
    assert!(served > 100, "too little load to judge: {:?}", run.outcomes);
    assert!(
        run.write_statuses.iter().all(|status| *status == 200),
        "a ledger write failed through the stalls: {:?}",
        run.write_statuses
    );
}

/// Past the patch's bound (4 s with the default timings) the leader falls silent and is
/// replaced: the checks above see it. Run on demand (about 20 s more of the machine).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "shows the term check fails on a stall past the heartbeat bound; run on demand"]
async fn a_stall_past_the_heartbeat_bound_costs_the_leader_its_term() {
    let run = run_episodes(6000).await;
    eprintln!(
        "FIGURE {EPISODES} flush stalls of 6000 ms: terms {:?} -> {:?}; answers {:?}; \
         slowest {:?}; flush seconds per replica {:.1?}; ledger writes {:?}",
        run.terms_before,
        run.terms_after,
        run.outcomes,
        run.slowest,
        run.stalled_seconds,
        run.write_statuses
    );
    assert!(
        run.terms_after
            .iter()
            .zip(&run.terms_before)
            .any(|(after, before)| after > before),
        "no election although the leader fell silent past the bound"
    );
}
