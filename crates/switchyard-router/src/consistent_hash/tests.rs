use super::*;
use crate::RoutingKeySource;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::ManualClock;

/// A slice boundary (30 s) that is also a hotspot-window boundary (60 s).
const T0: Duration = Duration::from_secs(1_700_000_040);
const SLICE: Duration = Duration::from_secs(30);

fn names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("replica-{i}")).collect()
}

fn policy_with(
    hotspot: HotspotConfig,
    clock: &ManualClock,
    id_base: u32,
    workers: &[String],
) -> ConsistentHashPolicy {
    let policy = ConsistentHashPolicy::new(
        ConsistentHashConfig::default(),
        hotspot,
        RoutingKeyConfig::default(),
        WallClock::new(Arc::new(clock.clone()), T0),
    );
    for (offset, name) in (0u32..).zip(workers) {
        policy.worker_added(WorkerId(id_base + offset), name);
    }
    policy
}

fn policy(workers: &[String]) -> ConsistentHashPolicy {
    policy_with(HotspotConfig::default(), &ManualClock::new(), 0, workers)
}

fn candidates(policy: &ConsistentHashPolicy, loads: &[(&str, u64)]) -> Vec<Candidate> {
    let ring = policy.membership.ring();
    loads
        .iter()
        .map(|&(name, in_flight)| Candidate {
            id: ring.id_of(name).unwrap(),
            in_flight,
            reported: None,
        })
        .collect()
}

fn idle(policy: &ConsistentHashPolicy) -> Vec<Candidate> {
    let ring = policy.membership.ring();
    ring.members()
        .iter()
        .map(|m| Candidate {
            id: m.id,
            in_flight: 0,
            reported: None,
        })
        .collect()
}

fn session(
    policy: &ConsistentHashPolicy,
    key: &str,
    candidates: &[Candidate],
) -> (String, &'static str) {
    let request = RouteRequest {
        prompt: "the same prompt for everyone",
        session_id: Some(key),
        user: None,
    };
    let decision = policy.select(&request, candidates).unwrap();
    assert!(policy.branches().contains(&decision.branch));
    let name = policy
        .membership
        .ring()
        .name_of(decision.worker)
        .unwrap()
        .to_string();
    (name, decision.branch)
}

/// The `nth` distinct worker clockwise from the key's position.
fn nth_owner(policy: &ConsistentHashPolicy, key: &str, nth: usize) -> String {
    let ring = policy.membership.ring();
    let index = ring.nth_distinct_from(stable_hash(key.as_bytes()), nth);
    let member = ring.points_member(index);
    ring.member(member).unwrap().name.to_string()
}

#[test]
fn a_key_always_lands_on_its_owner_and_replicas_agree() {
    let workers = names(5);
    let a = policy(&workers);
    let b = policy_with(HotspotConfig::default(), &ManualClock::new(), 40, &workers);
    for i in 0..500 {
        let key = format!("session-{i}");
        let on_a = session(&a, &key, &idle(&a));
        assert_eq!(on_a, (nth_owner(&a, &key, 0), "hash"));
        assert_eq!(session(&b, &key, &idle(&b)), on_a);
        assert_eq!(session(&a, &key, &idle(&a)), on_a, "stable on repeat");
    }
}

#[test]
fn the_key_comes_from_session_then_user_then_prompt() {
    let a = policy(&names(3));
    let fleet = idle(&a);
    let decide = |session_id, user, prompt| {
        a.select(
            &RouteRequest {
                prompt,
                session_id,
                user,
            },
            &fleet,
        )
        .unwrap()
    };
    assert_eq!(
        decide(Some("s"), Some("u"), "p").key_source,
        Some(RoutingKeySource::Session)
    );
    assert_eq!(
        decide(None, Some("u"), "p").key_source,
        Some(RoutingKeySource::User)
    );
    assert_eq!(
        decide(None, None, "p").key_source,
        Some(RoutingKeySource::PromptPrefix)
    );
    // The session decides the worker, not the prompt.
    let by_session = decide(Some("s-1"), None, "prompt one").worker;
    assert_eq!(
        decide(Some("s-1"), Some("other"), "prompt two").worker,
        by_session
    );
    let keyless = decide(None, None, "");
    assert_eq!((keyless.branch, keyless.key_source), ("no_key", None));
}

#[test]
fn filtered_owner_is_skipped_and_gets_its_keys_back_when_it_returns() {
    let a = policy(&names(4));
    let key = "session-42";
    let owner = nth_owner(&a, key, 0);
    let workers = names(4);
    let others: Vec<(&str, u64)> = workers
        .iter()
        .filter(|name| **name != owner)
        .map(|name| (name.as_str(), 0))
        .collect();
    assert_eq!(others.len(), 3);
    assert_eq!(
        session(&a, key, &candidates(&a, &others)),
        (nth_owner(&a, key, 1), "filtered_skip")
    );
    assert_eq!(session(&a, key, &idle(&a)), (owner, "hash"));
}

#[test]
fn an_owner_above_the_load_bound_is_skipped_for_the_next_worker() {
    let workers = names(4);
    let a = policy(&workers);
    let key = "session-7";
    let owner = nth_owner(&a, key, 0);
    let loads = |owner_load: u64, others: u64| -> Vec<Candidate> {
        let pairs: Vec<(&str, u64)> = workers
            .iter()
            .map(|n| (n.as_str(), if *n == owner { owner_load } else { others }))
            .collect();
        candidates(&a, &pairs)
    };
    // total 10 over 4 workers: cap = ceil(1.25 × 11 / 4) = 4, and the owner has 10.
    assert_eq!(
        session(&a, key, &loads(10, 0)),
        (nth_owner(&a, key, 1), "load_skip")
    );
    // total 8 + 3 × 6 = 26: cap = ceil(1.25 × 27 / 4) = 9; an owner at 8 keeps its key.
    assert_eq!(session(&a, key, &loads(8, 6)), (owner.clone(), "hash"));
    assert_eq!(session(&a, key, &loads(9, 6)).1, "load_skip");
}

#[test]
fn adding_and_removing_a_worker_moves_about_one_nth_of_keys() {
    let workers = names(9);
    let a = policy(&workers[..8]);
    let keys: Vec<String> = (0..20_000).map(|i| format!("user-{i}")).collect();
    let before: Vec<String> = keys.iter().map(|k| session(&a, k, &idle(&a)).0).collect();
    a.worker_added(WorkerId(8), &workers[8]);
    let after: Vec<String> = keys.iter().map(|k| session(&a, k, &idle(&a)).0).collect();
    let moved: Vec<usize> = (0..keys.len()).filter(|&i| before[i] != after[i]).collect();
    let share = moved.len() as f64 / keys.len() as f64;
    assert!((share - 1.0 / 9.0).abs() < 0.03, "moved {share}");
    assert!(
        moved.iter().all(|&i| after[i] == workers[8]),
        "only onto the newcomer"
    );
    let stats = a.stats();
    assert_eq!((stats.ring_workers, stats.ring_vnodes), (9, 9 * 256));
    assert!((stats.keys_moved_on_last_membership_change - share).abs() < 0.01);

    a.worker_removed(WorkerId(8));
    let restored: Vec<String> = keys.iter().map(|k| session(&a, k, &idle(&a)).0).collect();
    assert_eq!(restored, before);
    assert_eq!(a.stats().membership_changes, 10);
}

#[test]
fn a_hot_key_rotates_across_slices_while_cold_keys_never_move() {
    let clock = ManualClock::new();
    let workers = names(6);
    let hot = policy_with(HotspotConfig::default(), &clock, 0, &workers);
    let off = HotspotConfig {
        enabled: false,
        ..Default::default()
    };
    let reference = policy_with(off, &clock, 0, &workers);
    let cold_keys: Vec<String> = (0..100).map(|i| format!("cold-{i}")).collect();
    let mut hot_workers_by_slice = Vec::new();
    for slice in 0..4 {
        let mut hot_decisions: HashMap<String, usize> = HashMap::new();
        for i in 0..600 {
            // 30 % of traffic is one session; the rest spread over 100 cold sessions.
            if i % 10 < 3 {
                let (worker, branch) = session(&hot, "hot-session", &idle(&hot));
                if branch == "hot_spread" {
                    *hot_decisions.entry(worker).or_default() += 1;
                }
            } else {
                let key = &cold_keys[i % cold_keys.len()];
                let (worker, branch) = session(&hot, key, &idle(&hot));
                assert_eq!(branch, "hash", "{key} is not hot");
                assert_eq!(worker, session(&reference, key, &idle(&reference)).0);
            }
        }
        assert_eq!(
            hot_decisions.len(),
            1,
            "one worker per slice: {hot_decisions:?}"
        );
        hot_workers_by_slice.extend(hot_decisions.into_keys());
        assert_eq!(hot.stats().hot_keys_spread, 1, "slice {slice}");
        clock.advance(SLICE);
    }
    for pair in hot_workers_by_slice.windows(2) {
        assert_ne!(pair[0], pair[1], "{hot_workers_by_slice:?}");
    }
    let mut distinct = hot_workers_by_slice.clone();
    distinct.sort();
    distinct.dedup();
    let width = HotspotConfig::default().spread_width as usize;
    assert_eq!(distinct.len(), width, "rotates among spread_width workers");
    let expected: Vec<String> = (0..width)
        .map(|n| nth_owner(&hot, "hot-session", n))
        .collect();
    assert!(
        distinct.iter().all(|w| expected.contains(w)),
        "{distinct:?} vs {expected:?}"
    );
    assert!(hot.stats().hot_spread_decisions > 600);
}

#[test]
fn a_hot_key_over_the_bound_goes_to_the_least_loaded_of_its_spread_set() {
    let clock = ManualClock::new();
    let workers = names(6);
    let hotspot = HotspotConfig {
        spread_width: 3,
        ..Default::default()
    };
    let policy = policy_with(hotspot, &clock, 0, &workers);
    for _ in 0..200 {
        session(&policy, "hot-session", &idle(&policy));
    }
    let (slot, branch) = session(&policy, "hot-session", &idle(&policy));
    assert_eq!(branch, "hot_spread");
    let set: Vec<String> = (0..3)
        .map(|n| nth_owner(&policy, "hot-session", n))
        .collect();
    // The slot is far above the bound, every other worker within it: the idle member of the
    // set wins, not whichever worker's vnode happens to follow the slot clockwise.
    let idle_member = set.iter().find(|w| **w != slot).unwrap().clone();
    let loads: Vec<(&str, u64)> = workers
        .iter()
        .map(|w| {
            let load = if *w == slot {
                9
            } else if *w == idle_member {
                0
            } else {
                1
            };
            (w.as_str(), load)
        })
        .collect();
    let (worker, branch) = session(&policy, "hot-session", &candidates(&policy, &loads));
    assert_eq!(
        (worker.as_str(), branch),
        (idle_member.as_str(), "load_skip")
    );
}

#[test]
fn without_membership_every_request_falls_back_to_least_loaded() {
    let empty = policy(&[]);
    let fleet = [
        Candidate {
            id: WorkerId(3),
            in_flight: 4,
            reported: None,
        },
        Candidate {
            id: WorkerId(4),
            in_flight: 1,
            reported: None,
        },
    ];
    let decision = empty
        .select(
            &RouteRequest {
                session_id: Some("s"),
                ..Default::default()
            },
            &fleet,
        )
        .unwrap();
    assert_eq!(
        (decision.worker, decision.branch),
        (WorkerId(4), "ring_fallback")
    );
    assert!(empty.select(&RouteRequest::default(), &[]).is_none());
}
