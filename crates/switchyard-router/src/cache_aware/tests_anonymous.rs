//! Chats sent with neither session nor user: each conversation is named by its opening, placed
//! the same way by independently built replicas, and followed turn after turn on every replica,
//! while conversations sharing one system prompt still spread.

use super::conversation::Conversation;
use super::tests_affinity::{NAMES, fleet, idle_except, replica_with};
use super::*;
use crate::{DiscardAffinity, RoutingKeySource};
use std::collections::{BTreeMap, BTreeSet};

fn system_prompt(app: usize) -> String {
    format!(
        "<|system|>You are agent {app} of a tool-using fleet. {}\n",
        "Plan, call tools, report results in short sentences. ".repeat(20)
    )
}

/// Turn `turns` of conversation `conversation` of application `app`, as the gateway flattens it.
fn chat(app: usize, conversation: usize, turns: usize) -> String {
    let mut prompt = format!(
        "{}<|user|>task {conversation}: organise the files of project {conversation}\n",
        system_prompt(app)
    );
    for turn in 1..turns {
        prompt.push_str(&format!(
            "<|assistant|>done step {turn} of {conversation}\n<|user|>next step {turn}\n"
        ));
    }
    prompt
}

fn anonymous(prompt: &str) -> RouteRequest<'_> {
    RouteRequest {
        prompt,
        session_id: None,
        user: None,
    }
}

fn routed(policy: &CacheAwarePolicy, prompt: &str, candidates: &[Candidate]) -> (String, Decision) {
    let decision = policy.select(&anonymous(prompt), candidates).unwrap();
    let name = policy
        .membership
        .ring()
        .name_of(decision.worker)
        .unwrap()
        .to_string();
    (name, decision)
}

#[test]
fn the_identity_is_the_opening_shared_by_every_turn_and_no_other_conversation() {
    let key = |prompt: &str| Conversation::anonymous(prompt).unwrap();
    let first = key(&chat(0, 1, 1));
    assert!(first.first_turn);
    for turns in 2..8 {
        let later = key(&chat(0, 1, turns));
        assert_eq!(later.key, first.key, "turn {turns}");
        assert!(!later.first_turn);
    }
    // Same system prompt, another first message; another system prompt, same message.
    assert_ne!(key(&chat(0, 2, 1)).key, first.key);
    assert_ne!(key(&chat(1, 1, 1)).key, first.key);
    // Never the key a session would give the same opening, nor any session's.
    let prompt = chat(0, 1, 1);
    assert_ne!(
        Conversation::of(&prompt, stable_hash(b"s1")).unwrap().key,
        first.key
    );
    // A completion prompt has no opening to name.
    assert_eq!(Conversation::anonymous("Summarise the report below."), None);
}

#[test]
fn independently_built_replicas_place_and_follow_conversations_identically() {
    // Different worker ids and registration orders, same names and the same load view.
    let a = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let b = replica_with(77, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let loads = [("gpu-a", 1), ("gpu-b", 0), ("gpu-c", 2), ("gpu-d", 1)];
    let mut homes = BTreeMap::new();
    for conversation in 0..40 {
        let opening = chat(conversation % 2, conversation, 1);
        let (on_a, decision) = routed(&a, &opening, &fleet(&a, &loads));
        let (on_b, _) = routed(&b, &opening, &fleet(&b, &loads));
        assert_eq!(on_a, on_b, "conversation {conversation}");
        assert_eq!(decision.key_source, Some(RoutingKeySource::PromptPrefix));
        homes.insert(conversation, on_a);
    }
    // B never saw any later turn; A saw the openings. Both send every later turn home, whatever
    // their (private, different) load views say.
    for conversation in 0..40 {
        for turns in 2..5 {
            let prompt = chat(conversation % 2, conversation, turns);
            let busy_home: Vec<(&str, u64)> = NAMES
                .iter()
                .map(|&n| (n, if n == homes[&conversation] { 6 } else { 0 }))
                .collect();
            let (on_a, _) = routed(&a, &prompt, &fleet(&a, &busy_home));
            let (on_b, _) = routed(&b, &prompt, &idle_except(&b, &[]));
            assert_eq!(
                (&on_a, &on_b),
                (&homes[&conversation], &homes[&conversation])
            );
        }
    }
}

#[test]
fn conversations_sharing_one_system_prompt_spread_over_the_fleet() {
    let policy = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let mut per_worker: BTreeMap<String, usize> = BTreeMap::new();
    for conversation in 0..200 {
        let (worker, _) = routed(
            &policy,
            &chat(0, conversation, 1),
            &idle_except(&policy, &[]),
        );
        *per_worker.entry(worker.clone()).or_insert(0) += 1;
        // A second turn follows the first as a continuation, not the shared system prompt.
        let (again, decision) = routed(
            &policy,
            &chat(0, conversation, 2),
            &idle_except(&policy, &[]),
        );
        assert_eq!((again, decision.branch), (worker, PREFIX_HIT));
    }
    assert_eq!(per_worker.len(), NAMES.len(), "{per_worker:?}");
    assert!(per_worker.values().all(|&n| n >= 30), "{per_worker:?}");
}

#[test]
fn switched_off_anonymous_chats_follow_the_shared_prompt_prefix_as_before() {
    let config = CacheAwareConfig {
        anonymous_conversations: false,
        ..Default::default()
    };
    let policy = replica_with(0, Arc::new(DiscardAffinity), config);
    let workers: BTreeSet<String> = (0..20)
        .map(|conversation| {
            routed(
                &policy,
                &chat(0, conversation, 1),
                &idle_except(&policy, &[]),
            )
            .0
        })
        .collect();
    assert_eq!(
        workers.len(),
        1,
        "one system prompt, one worker: {workers:?}"
    );
}
