//! Several replicas, each seeing a random share of a conversation's turns and its own load:
//! the turns still land on one worker, with or without the replicas sharing affinity events.

use super::tests_affinity::{NAMES, Recorder, fleet, idle_except, replica_with};
use super::*;
use crate::DiscardAffinity;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

fn turn_prompt(session: usize, conversation: usize, turns: usize) -> String {
    let mut prompt = format!(
        "<|system|>You are assistant persona {}. {}\n<|user|>session {session} opens \
         conversation {conversation}\n",
        session % 3,
        "Keep answers short and cite sources. ".repeat(12)
    );
    for turn in 1..turns {
        prompt.push_str(&format!(
            "<|assistant|>answer {turn}\n<|user|>follow-up {turn} of {session}\n"
        ));
    }
    prompt
}

fn name_of(policy: &CacheAwarePolicy, decision: &Decision) -> String {
    policy
        .membership
        .ring()
        .name_of(decision.worker)
        .unwrap()
        .to_string()
}

/// Random in-flight counts, drawn per decision: each replica's view of the fleet differs.
fn random_loads(policy: &CacheAwarePolicy, rng: &mut SmallRng) -> Vec<Candidate> {
    let loads: Vec<(&str, u64)> = NAMES.iter().map(|&n| (n, rng.random_range(0..4))).collect();
    fleet(policy, &loads)
}

#[test]
fn replicas_that_never_saw_a_conversation_send_its_later_turns_where_it_lives() {
    let a = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let b = replica_with(40, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let first = turn_prompt(3, 0, 1);
    let request = |prompt| RouteRequest {
        prompt,
        session_id: Some("s3"),
        user: None,
    };
    let placed = a.select(&request(&first), &idle_except(&a, &[])).unwrap();
    let home = name_of(&a, &placed);
    assert_eq!(placed.branch, HASH_PLACEMENT);
    // B sees the second turn with the home far above both load bounds: it still goes home,
    // because A (and any other replica) sends the conversation's turns there.
    let second = turn_prompt(3, 0, 2);
    let busy: Vec<(&str, u64)> = NAMES
        .iter()
        .map(|&n| (n, if n == home { 5 } else { 0 }))
        .collect();
    let on_b = b.select(&request(&second), &fleet(&b, &busy)).unwrap();
    assert_eq!(
        (name_of(&b, &on_b), on_b.branch),
        (home.clone(), HASH_PLACEMENT)
    );
    // A saw only the first turn; the third follows its cache there.
    let third = turn_prompt(3, 0, 3);
    let on_a = a.select(&request(&third), &fleet(&a, &busy)).unwrap();
    assert_eq!((name_of(&a, &on_a), on_a.branch), (home, PREFIX_HIT));
}

/// The first-turn bound at any count, so the random loads below do move first turns.
fn any_load_moves() -> CacheAwareConfig {
    CacheAwareConfig {
        opening_min_in_flight: 0,
        ..Default::default()
    }
}

/// Three replicas, each request to a random one with random loads; returns, per
/// conversation, the workers its turns went to and whether its first turn was load-moved.
fn run(sink_shared: bool, seed: u64) -> Vec<(Vec<String>, bool)> {
    let recorder = Arc::new(Recorder::default());
    let sink = |shared: bool| -> Arc<dyn AffinitySink> {
        if shared {
            recorder.clone()
        } else {
            Arc::new(DiscardAffinity)
        }
    };
    let replicas: Vec<CacheAwarePolicy> = (0..3)
        .map(|r| replica_with(r * 10, sink(sink_shared), any_load_moves()))
        .collect();
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut turns_of: BTreeMap<(usize, usize), (Vec<String>, bool)> = BTreeMap::new();
    let mut next_turn = [(0usize, 1usize); 12];
    for _ in 0..600 {
        let session = rng.random_range(0..next_turn.len());
        let (conversation, turn) = next_turn[session];
        next_turn[session] = if turn == 8 {
            (conversation + 1, 1)
        } else {
            (conversation, turn + 1)
        };
        let prompt = turn_prompt(session, conversation, turn);
        let session_id = format!("s{session}");
        let replica = &replicas[rng.random_range(0..replicas.len())];
        let loads = random_loads(replica, &mut rng);
        let request = RouteRequest {
            prompt: &prompt,
            session_id: Some(&session_id),
            user: None,
        };
        let decision = replica.select(&request, &loads).unwrap();
        let entry = turns_of.entry((session, conversation)).or_default();
        entry.0.push(name_of(replica, &decision));
        if turn == 1 {
            entry.1 = decision.branch == LOAD_MOVE;
        }
        // The ledger's part: every replica applies every event (the emitter idempotently).
        for event in recorder.take() {
            for policy in &replicas {
                policy.apply_affinity(&event);
            }
        }
    }
    turns_of.into_values().collect()
}

fn stays_on_one_worker((workers, _): &(Vec<String>, bool)) -> bool {
    workers.iter().all(|w| *w == workers[0])
}

#[test]
fn with_events_shared_every_conversation_stays_on_one_worker_across_replicas() {
    for seed in 0..3 {
        let conversations = run(true, seed);
        let load_moved = conversations.iter().filter(|c| c.1).count();
        assert!(load_moved > 0, "the bounds never moved a first turn");
        let split: Vec<_> = conversations
            .iter()
            .filter(|c| !stays_on_one_worker(c))
            .collect();
        assert!(split.is_empty(), "seed {seed}: {split:?}");
    }
}

#[test]
fn without_shared_events_only_load_moved_openings_can_split() {
    for seed in 0..3 {
        let conversations = run(false, seed);
        let split: Vec<_> = conversations
            .iter()
            .filter(|c| !c.1 && !stays_on_one_worker(c))
            .collect();
        assert!(split.is_empty(), "seed {seed}: {split:?}");
        let workers: std::collections::BTreeSet<&String> =
            conversations.iter().flat_map(|c| &c.0).collect();
        assert_eq!(workers.len(), NAMES.len(), "conversations spread");
    }
}
