//! A first turn evens out its group workers' cache writes only where its later turns follow it
//! to the worker it took: on a replica that routes its conversations whole, or on replicas that
//! apply each other's placements (one Raft group); one of several independent replicas fed at
//! random keeps to the draw the others share.

use super::tests_affinity::{NAMES, Recorder, idle_except};
use super::tests_prompt_group::{chat, replica_with, routed};
use super::*;
use crate::DiscardAffinity;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;

fn config(balance: bool) -> CacheAwareConfig {
    CacheAwareConfig {
        prompt_group_balance: balance,
        ..Default::default()
    }
}

/// Coefficient of variation of the workers' cache writes.
fn spread(written: &BTreeMap<String, usize>) -> f64 {
    let values: Vec<f64> = NAMES
        .iter()
        .map(|&name| written.get(name).copied().unwrap_or(0) as f64)
        .collect();
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let variance = values.iter().map(|w| (w - mean).powi(2)).sum::<f64>() / values.len() as f64;
    variance.sqrt() / mean
}

/// Conversation `n`'s length in turns: 1 to 9, in an order no placement can predict.
fn turns_of(n: usize) -> usize {
    1 + (n * 7 + n / 3) % 9
}

/// The trace every test here sends: a new conversation each step for 300 steps and one more
/// turn of each in progress, with the whole history, as (conversation, turn).
fn for_each_turn(mut send: impl FnMut(usize, usize)) {
    let mut active: Vec<(usize, usize)> = Vec::new();
    for n in 0..400usize {
        if n < 300 {
            active.push((n, 1));
        }
        for (conversation, turn) in active.iter_mut() {
            send(*conversation, *turn);
            *turn += 1;
        }
        active.retain(|&(conversation, turn)| turn <= turns_of(conversation));
    }
}

/// What each worker had to write: every turn's prompt beyond the previous turn's, which that
/// worker holds when every later turn goes where its first went.
#[derive(Default)]
struct Writes {
    by_worker: BTreeMap<String, usize>,
    previous_len: BTreeMap<usize, usize>,
}

impl Writes {
    fn add(&mut self, conversation: usize, prompt: &str, worker: &str) {
        let before = self.previous_len.insert(conversation, prompt.len());
        *self.by_worker.entry(worker.to_string()).or_insert(0) +=
            prompt.len() - before.unwrap_or(0);
    }
}

#[test]
fn a_replica_routing_whole_conversations_evens_out_its_workers_writes_and_keeps_them_whole() {
    let (balanced, clock) = replica_with(config(true), 0, Arc::new(DiscardAffinity));
    let (drawn, drawn_clock) = replica_with(config(false), 0, Arc::new(DiscardAffinity));
    let mut branches: BTreeMap<&str, usize> = BTreeMap::new();
    let mut homes = BTreeMap::new();
    let (mut written, mut drawn_written) = (Writes::default(), Writes::default());
    // Both replicas see every turn, so each meets every conversation at its opening.
    for_each_turn(|conversation, turn| {
        clock.advance(Duration::from_millis(20));
        drawn_clock.advance(Duration::from_millis(20));
        let prompt = chat(0, conversation, turn);
        let (worker, decision) = routed(&balanced, &prompt, &idle_except(&balanced, &[]));
        let (drawn_worker, _) = routed(&drawn, &prompt, &idle_except(&drawn, &[]));
        written.add(conversation, &prompt, &worker);
        drawn_written.add(conversation, &prompt, &drawn_worker);
        *branches.entry(decision.branch).or_insert(0) += 1;
        if turn == 1 {
            homes.insert(conversation, worker);
        } else {
            // Every later turn follows its first, wherever that went.
            assert_eq!(Some(&worker), homes.get(&conversation), "{conversation}");
            assert_eq!(decision.branch, PREFIX_HIT, "{conversation}");
        }
    });
    assert!(balanced.stats().openings_met_share > 0.99);
    // The replica said so only after it met enough conversations, then balanced often.
    let moved = branches.get(PROMPT_GROUP_BALANCED).copied().unwrap_or(0);
    assert!(moved >= 30, "{branches:?}");
    assert!(branches[PROMPT_GROUP] >= 60, "{branches:?}");
    let (even, uneven) = (spread(&written.by_worker), spread(&drawn_written.by_worker));
    assert!(even < uneven * 0.7, "balanced {even}, drawn {uneven}");
}

#[test]
fn one_of_several_independent_replicas_keeps_to_the_shared_draw() {
    let (policy, clock) = replica_with(config(true), 0, Arc::new(DiscardAffinity));
    // The same replica's twin with balancing off decides every first turn by the draw alone.
    let (twin, twin_clock) = replica_with(config(false), 0, Arc::new(DiscardAffinity));
    // Fed at random by three replicas' balancer: it meets a third of the conversations at
    // their opening, the others first at a later turn.
    for n in 0..400usize {
        clock.advance(Duration::from_millis(50));
        twin_clock.advance(Duration::from_millis(50));
        let first_met = if n % 3 == 0 { 1 } else { 2 + n % 4 };
        for turn in first_met..=first_met + 1 {
            let prompt = chat(0, n, turn);
            let (worker, decision) = routed(&policy, &prompt, &idle_except(&policy, &[]));
            let (twin_worker, twin_decision) = routed(&twin, &prompt, &idle_except(&twin, &[]));
            assert_eq!(
                (worker, decision.branch),
                (twin_worker, twin_decision.branch)
            );
            assert_ne!(decision.branch, PROMPT_GROUP_BALANCED);
        }
    }
    let share = policy.stats().openings_met_share;
    assert!((0.25..0.45).contains(&share), "{share}");
}

/// Three replicas of one group, every announcement applied by all three (the ledger's part),
/// each request to one of them at random. Returns the decisions' branches
/// and what each worker had to write; asserts every later turn follows its first.
fn group_of_three(balance: bool) -> (BTreeMap<&'static str, usize>, BTreeMap<String, usize>) {
    let recorder = Arc::new(Recorder::default());
    let replicas: Vec<_> = (0..3)
        .map(|_| replica_with(config(balance), 0, recorder.clone()))
        .collect();
    let mut branches = BTreeMap::new();
    let (mut homes, mut written) = (BTreeMap::new(), Writes::default());
    let mut rng = SmallRng::seed_from_u64(7);
    for_each_turn(|conversation, turn| {
        for (_, clock) in &replicas {
            clock.advance(Duration::from_millis(20));
        }
        // Fed at random: each replica meets about a third of the openings.
        let (policy, _) = &replicas[rng.random_range(0..replicas.len())];
        let prompt = chat(0, conversation, turn);
        let (worker, decision) = routed(policy, &prompt, &idle_except(policy, &[]));
        for event in recorder.take() {
            for (replica, _) in &replicas {
                replica.apply_affinity(&event);
            }
        }
        written.add(conversation, &prompt, &worker);
        *branches.entry(decision.branch).or_insert(0) += 1;
        if turn == 1 {
            homes.insert(conversation, worker);
        } else {
            // On whichever replica it lands, a later turn goes where its first went.
            assert_eq!(Some(&worker), homes.get(&conversation), "{conversation}");
        }
    });
    for (policy, _) in &replicas {
        let stats = policy.stats();
        assert!((0.2..0.5).contains(&stats.openings_met_share), "{stats:?}");
        assert!(stats.placement_replicas > 2.0, "{stats:?}");
    }
    (branches, written.by_worker)
}

#[test]
fn replicas_sharing_their_placements_even_out_writes_and_keep_conversations_whole() {
    let (branches, written) = group_of_three(true);
    let (drawn_branches, drawn_written) = group_of_three(false);
    let moved = branches.get(PROMPT_GROUP_BALANCED).copied().unwrap_or(0);
    assert!(moved >= 30, "{branches:?}");
    assert!(!drawn_branches.contains_key(PROMPT_GROUP_BALANCED));
    let (even, uneven) = (spread(&written), spread(&drawn_written));
    assert!(even < uneven * 0.7, "balanced {even}, drawn {uneven}");
}
