//! Placement by routing key: sessions sharing a system prompt spread, replicas agree, a
//! session's conversation sticks, both load bounds bite, and migrations follow the key.

use super::conversation::Conversation;
use super::tests_affinity::{
    NAMES, Recorder, fleet, frozen_clock, idle_except, replica_with, without_share_bound,
};
use super::*;
use crate::{AffinityReason, DiscardAffinity, RoutingKeySource};
use std::collections::BTreeMap;
use std::time::Duration;
use switchyard_core::ManualClock;

/// Chats without session or user keyed by their leading block, not named by their opening.
fn prompt_prefix_only() -> CacheAwareConfig {
    CacheAwareConfig {
        anonymous_conversations: false,
        ..Default::default()
    }
}

/// Long enough that every first turn matches it strongly (> 50 % of the prompt).
fn system_prompt() -> String {
    format!(
        "<|system|>You are the support assistant of an online shop. {}\n",
        "Answer politely, cite the order number, never invent a tracking code. ".repeat(6)
    )
}

fn first_turn(i: usize) -> String {
    format!(
        "{}<|user|>question {i}: where is my order?\n",
        system_prompt()
    )
}

fn request<'a>(prompt: &'a str, session: Option<&'a str>) -> RouteRequest<'a> {
    RouteRequest {
        prompt,
        session_id: session,
        user: None,
    }
}

/// Routes and returns (worker name, branch).
fn route_as(
    policy: &CacheAwarePolicy,
    request: &RouteRequest<'_>,
    candidates: &[Candidate],
) -> (String, &'static str) {
    let decision = policy.select(request, candidates).unwrap();
    assert!(policy.branches().contains(&decision.branch));
    let name = policy
        .membership
        .ring()
        .name_of(decision.worker)
        .unwrap()
        .to_string();
    (name, decision.branch)
}

fn route_session(
    policy: &CacheAwarePolicy,
    session: &str,
    prompt: &str,
    candidates: &[Candidate],
) -> (String, &'static str) {
    route_as(policy, &request(prompt, Some(session)), candidates)
}

fn owner_of(policy: &CacheAwarePolicy, key: &str) -> String {
    owner_at(policy, stable_hash(key.as_bytes()))
}

fn owner_at(policy: &CacheAwarePolicy, position: u64) -> String {
    let ring = policy.membership.ring();
    let member = ring.owner(position).unwrap();
    ring.member(member).unwrap().name.to_string()
}

/// The key a chat turn of `session` is placed by: its conversation, not the session alone.
fn conversation_key(session: &str, prompt: &str) -> u64 {
    Conversation::of(prompt, stable_hash(session.as_bytes()))
        .unwrap()
        .key
}

/// The ring owner of `session`'s conversation opened by `opening`.
fn conversation_owner(policy: &CacheAwarePolicy, session: &str, opening: &str) -> String {
    owner_at(policy, conversation_key(session, opening))
}

/// The first `count` sessions `{prefix}{i}` whose conversation opened by `opening(j)` (j-th
/// session found) has its ring owner at `name`.
fn sessions_owned_by(
    policy: &CacheAwarePolicy,
    name: &str,
    prefix: &str,
    opening: impl Fn(usize) -> String,
    count: usize,
) -> Vec<String> {
    let mut found = Vec::new();
    for i in 0.. {
        if found.len() == count {
            break;
        }
        let session = format!("{prefix}{i}");
        if conversation_owner(policy, &session, &opening(found.len())) == name {
            found.push(session);
        }
    }
    found
}

/// Every worker busy with `in_flight[name]`, the rest idle.
fn loads(policy: &CacheAwarePolicy, busy: &[(&str, u64)]) -> Vec<Candidate> {
    let all: Vec<(&str, u64)> = NAMES
        .iter()
        .map(|&name| {
            let load = busy.iter().find(|(n, _)| *n == name).map_or(0, |&(_, l)| l);
            (name, load)
        })
        .collect();
    fleet(policy, &all)
}

fn coefficient_of_variation(counts: &BTreeMap<String, u64>) -> f64 {
    let values: Vec<f64> = NAMES
        .iter()
        .map(|name| counts.get(*name).copied().unwrap_or(0) as f64)
        .collect();
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / values.len() as f64;
    variance.sqrt() / mean
}

#[test]
fn sessions_sharing_one_system_prompt_spread_over_the_fleet() {
    // The ring alone, and the ring with the recent-share bound (the default).
    for config in [without_share_bound(), CacheAwareConfig::default()] {
        let policy = replica_with(0, Arc::new(DiscardAffinity), config.clone());
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for i in 0..1_000 {
            let session = format!("session-{i}");
            let (name, branch) = route_session(
                &policy,
                &session,
                &first_turn(i),
                &idle_except(&policy, &[]),
            );
            assert_ne!(
                branch, "prefix_hit",
                "a shared system prompt is no session affinity"
            );
            *counts.entry(name).or_default() += 1;
        }
        let cv = coefficient_of_variation(&counts);
        assert!(cv < 0.15, "{config:?}: cv {cv:.3}, placements {counts:?}");
    }
    // Control: the same prompts without an identity, not named as conversations, follow the
    // shared prefix to one worker (tests_anonymous covers them named by their openings).
    let policy = replica_with(0, Arc::new(DiscardAffinity), prompt_prefix_only());
    let mut workers = std::collections::BTreeSet::new();
    for i in 0..50 {
        let prompt = first_turn(i);
        workers.insert(route_as(&policy, &request(&prompt, None), &idle_except(&policy, &[])).0);
    }
    assert_eq!(workers.len(), 1, "{workers:?}");
}

#[test]
fn two_replicas_place_the_same_sessions_identically() {
    // The first-turn bound at any count, so the loads below (0–2) move some openings.
    let config = CacheAwareConfig {
        opening_min_in_flight: 0,
        ..Default::default()
    };
    let a = replica_with(0, Arc::new(DiscardAffinity), config.clone());
    let b = replica_with(100, Arc::new(DiscardAffinity), config);
    let mut branches = std::collections::BTreeSet::new();
    for i in 0..300 {
        let busy: Vec<(&str, u64)> = (0u64..)
            .zip(NAMES)
            .map(|(n, name)| (name, (i as u64 + n) % 3))
            .collect();
        let session = format!("user-{}", i % 120);
        let prompt = first_turn(i);
        let on_a = route_session(&a, &session, &prompt, &loads(&a, &busy));
        let on_b = route_session(&b, &session, &prompt, &loads(&b, &busy));
        assert_eq!(on_a, on_b, "replicas disagree on {session} at request {i}");
        branches.insert(on_a.1);
    }
    assert!(
        branches.contains("hash_placement") && branches.contains("load_move"),
        "{branches:?}"
    );
}

#[test]
fn a_sessions_later_turns_stay_on_its_worker_and_its_next_conversation_is_placed_anew() {
    let policy = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let session = "session-7";
    let mut prompt = first_turn(7);
    let (home, branch) = route_session(&policy, session, &prompt, &idle_except(&policy, &[]));
    assert_eq!(branch, "hash_placement");
    // Busier than placement would allow (4 in flight: at the opening bound's floor, over
    // ceil(2.0 × 5 / 4) = 3) and far above its recent share: the conversation still follows
    // its cache.
    let home_busy = loads(&policy, &[(&home, 4)]);
    for turn in 0..6 {
        prompt.push_str(&format!(
            "<|assistant|>answer {turn}\n<|user|>follow-up {turn}\n"
        ));
        let decision = policy
            .select(&request(&prompt, Some(session)), &home_busy)
            .unwrap();
        let name = policy
            .membership
            .ring()
            .name_of(decision.worker)
            .unwrap()
            .to_string();
        assert_eq!(
            (name.as_str(), decision.branch),
            (home.as_str(), "prefix_hit")
        );
        let matched = decision.prefix_match.unwrap();
        assert!(matched.holder_is_candidate && matched.matched_ratio > 0.5);
        assert_eq!(decision.key_source, Some(RoutingKeySource::Session));
    }
    // A new conversation of the same session continues nothing: placed again by its own
    // opening (here one whose ring owner is the busy home), and the bound moves it.
    let next = (8..)
        .map(first_turn)
        .find(|opening| conversation_owner(&policy, session, opening) == home)
        .unwrap();
    let (elsewhere, branch) = route_session(&policy, session, &next, &home_busy);
    assert_eq!(branch, "load_move");
    assert_ne!(elsewhere, home);
}

#[test]
fn the_in_flight_bound_bites_at_low_counts() {
    // Conversation openings bounded as tightly as other keys (by default they are loose).
    let config = CacheAwareConfig {
        opening_load_factor: 1.25,
        opening_min_in_flight: 0,
        ..without_share_bound()
    };
    let probe = replica_with(0, Arc::new(DiscardAffinity), config.clone());
    let owner = "gpu-b";
    let keys = sessions_owned_by(&probe, owner, "s-", |_| first_turn(1), 4);
    let cases: [(&[(&str, u64)], bool); 4] = [
        // cap = ceil(1.25 × (total + 1) / 4): 1, 1, 2, 2.
        (&[(owner, 1)], false),
        (&[(owner, 2)], false),
        (
            &[("gpu-a", 1), (owner, 1), ("gpu-c", 1), ("gpu-d", 1)],
            true,
        ),
        (&[(owner, 2), ("gpu-a", 2), ("gpu-c", 1)], false),
    ];
    for ((busy, owner_accepted), key) in cases.into_iter().zip(&keys) {
        let policy = replica_with(0, Arc::new(DiscardAffinity), config.clone());
        let (name, branch) = route_session(&policy, key, &first_turn(1), &loads(&policy, busy));
        if owner_accepted {
            assert_eq!(
                (name.as_str(), branch),
                (owner, "hash_placement"),
                "{busy:?}"
            );
        } else {
            assert_eq!(branch, "load_move", "{busy:?}");
            assert_ne!(name, owner, "{busy:?}");
        }
    }
}

#[test]
fn the_share_bound_moves_new_sessions_off_a_worker_busy_with_a_heavy_one_until_it_decays() {
    let clock = ManualClock::new();
    let policy = CacheAwarePolicy::new(
        CacheAwareConfig::default(),
        &crate::ConsistentHashConfig::default(),
        crate::RoutingKeyConfig::default(),
        WallClock::new(Arc::new(clock.clone()), Duration::from_secs(1_700_000_000)),
        Arc::new(DiscardAffinity),
    )
    .unwrap();
    for (id, name) in (0u32..).zip(NAMES) {
        policy.worker_added(WorkerId(id), name);
    }
    let owner = "gpu-c";
    let heavy = &sessions_owned_by(&policy, owner, "heavy-", first_turn, 1)[0];
    // Light sessions sending completion prompts (no conversation to name) are placed by their
    // session key under the share bound; conversation openings are not (tests_anonymous).
    let light: Vec<String> = (0..)
        .map(|i| format!("light-{i}"))
        .filter(|session| owner_of(&policy, session) == owner)
        .take(2)
        .collect();
    let completion = |i: usize| format!("Summarise report {i}: {}", "figures ".repeat(20));
    let mut prompt = first_turn(0);
    let idle = idle_except(&policy, &[]);
    assert_eq!(
        route_session(&policy, heavy, &prompt, &idle),
        (owner.to_string(), "hash_placement")
    );
    for turn in 0..11 {
        prompt.push_str(&format!("<|assistant|>a{turn}\n<|user|>q{turn}\n"));
        assert_eq!(
            route_session(&policy, heavy, &prompt, &idle).1,
            "prefix_hit"
        );
    }
    // Every in-flight count is 0, yet the owner took all 12 recent requests.
    let (name, branch) = route_session(&policy, &light[0], &completion(1), &idle);
    assert_eq!(branch, "load_move");
    assert_ne!(name, owner);
    // Ten half-lives later the burst is forgotten and the owner takes its keys again.
    clock.advance(Duration::from_secs(100));
    assert_eq!(
        route_session(&policy, &light[1], &completion(2), &idle),
        (owner.to_string(), "hash_placement")
    );
}

#[test]
fn a_migrated_session_is_followed_by_another_replica_key_and_conversation() {
    let recorder = Arc::new(Recorder::default());
    let a = replica_with(0, recorder.clone(), CacheAwareConfig::default());
    let b = replica_with(50, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let session = "session-42";
    let first = first_turn(42);
    let (holder, _) = route_session(&a, session, &first, &idle_except(&a, &[]));
    assert_eq!(
        route_session(&b, session, &first, &idle_except(&b, &[])).0,
        holder
    );

    let second = format!("{first}<|assistant|>it ships today\n<|user|>thanks, and the invoice?\n");
    let (new_holder, branch) = route_session(&a, session, &second, &idle_except(&a, &[&holder]));
    assert_eq!(branch, "migrated");
    let events = recorder.take();
    assert_eq!(events.len(), 1);
    let event = &events[0];
    assert_eq!(event.reason, AffinityReason::Migration);
    assert_eq!(
        event.prefix_key,
        conversation_key(session, &first),
        "keyed by the session's conversation"
    );
    assert_eq!(event.prefix.as_ref(), first, "the conversation so far");
    assert_eq!(
        (event.worker.as_str(), event.displaced.clone()),
        (new_holder.as_str(), vec![holder.clone()])
    );

    for _ in 0..2 {
        assert_eq!(b.apply_affinity(event), AffinityApplied::Applied);
        b.state.lock().tree.check_invariants();
    }
    // The old holder is back and idle; B follows the conversation to its new holder, even
    // with the new holder the busier one…
    let third = format!("{second}<|assistant|>sent\n<|user|>great\n");
    assert_eq!(
        route_session(&b, session, &third, &loads(&b, &[(&new_holder, 5)])),
        (new_holder, "prefix_hit")
    );
    // …while the session's next conversation is placed by its own opening.
    let (_, branch) = route_session(&b, session, &first_turn(43), &idle_except(&b, &[]));
    assert!(matches!(branch, "hash_placement" | "load_move"), "{branch}");
}

#[test]
fn a_session_load_move_broadcasts_the_key_hash_not_the_session_id() {
    let recorder = Arc::new(Recorder::default());
    let a = replica_with(0, recorder.clone(), without_share_bound());
    let b = replica_with(10, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let session = "session-9";
    let opening = first_turn(9);
    let owner = conversation_owner(&a, session, &opening);
    let (moved_to, branch) = route_session(&a, session, &opening, &loads(&a, &[(&owner, 20)]));
    assert_eq!(branch, "load_move");
    let events = recorder.take();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].reason, AffinityReason::LoadMove);
    assert_eq!(events[0].prefix_key, conversation_key(session, &opening));
    assert!(events[0].prefix.is_empty() && events[0].displaced.is_empty());
    assert_eq!(b.apply_affinity(&events[0]), AffinityApplied::Applied);
    // B never saw the conversation, yet its next turn goes where A moved it, even with the
    // ring owner idle again.
    let second = format!("{opening}<|assistant|>on its way\n<|user|>when?\n");
    for policy in [&a, &b] {
        let expected = if std::ptr::eq(policy, &a) {
            "prefix_hit"
        } else {
            "placement_override"
        };
        assert_eq!(
            route_session(policy, session, &second, &idle_except(policy, &[])),
            (moved_to.clone(), expected)
        );
    }
}

#[test]
fn prompts_without_session_or_user_still_place_by_their_leading_block() {
    let policy = replica_with(0, Arc::new(DiscardAffinity), prompt_prefix_only());
    let prompt = first_turn(1);
    let block = crate::routing_key::leading_chars(&prompt, 256);
    let decision = policy
        .select(&request(&prompt, None), &idle_except(&policy, &[]))
        .unwrap();
    let name = policy
        .membership
        .ring()
        .name_of(decision.worker)
        .unwrap()
        .to_string();
    assert_eq!(
        (name, decision.branch),
        (owner_of(&policy, block), "hash_placement")
    );
    assert_eq!(decision.key_source, Some(RoutingKeySource::PromptPrefix));
    // A user name is an identity too.
    let as_user = RouteRequest {
        prompt: "<|user|>hello there, a prompt nobody has seen yet\n",
        session_id: None,
        user: Some("alice"),
    };
    let decision = policy.select(&as_user, &idle_except(&policy, &[])).unwrap();
    let name = policy
        .membership
        .ring()
        .name_of(decision.worker)
        .unwrap()
        .to_string();
    assert_eq!(
        (name, decision.key_source),
        (
            conversation_owner(&policy, "alice", as_user.prompt),
            Some(RoutingKeySource::User)
        )
    );
}

#[test]
fn without_any_routing_key_placement_is_least_loaded() {
    let policy = CacheAwarePolicy::new(
        CacheAwareConfig::default(),
        &crate::ConsistentHashConfig::default(),
        crate::RoutingKeyConfig {
            order: vec![RoutingKeySource::Session],
            ..Default::default()
        },
        frozen_clock(),
        Arc::new(DiscardAffinity),
    )
    .unwrap();
    for (id, name) in (0u32..).zip(NAMES) {
        policy.worker_added(WorkerId(id), name);
    }
    let decision = policy
        .select(
            &request(&first_turn(1), None),
            &loads(
                &policy,
                &[("gpu-a", 2), ("gpu-b", 1), ("gpu-c", 2), ("gpu-d", 3)],
            ),
        )
        .unwrap();
    assert_eq!(
        (decision.worker, decision.branch, decision.key_source),
        (WorkerId(1), "least_loaded", None)
    );
}
