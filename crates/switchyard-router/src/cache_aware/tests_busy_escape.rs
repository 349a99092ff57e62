//! Later turns leaving a worker that carries a full batch (`later_turn_escape_in_flight`):
//! by this replica's own in-flight count, or by the engine's reported running + queued when
//! higher; to the first worker clockwise carrying at most half that load. Nothing moves below
//! the depth, with the escape off (the default), for a first turn, or with no worker that
//! much lighter.

use super::tests_affinity::{NAMES, Recorder, replica_with};
use super::*;
use crate::{AffinityReason, DiscardAffinity, ReportedLoad};

const BATCH: u64 = 8;

/// A worker's name, this replica's in-flight count on it, and its reported (running, queued).
type WorkerLoad<'a> = (&'a str, u64, Option<(u64, u64)>);

fn chat(conversation: usize, turns: usize) -> String {
    let mut prompt = format!(
        "<|system|>You are a careful research agent. {}\n<|user|>question {conversation}: \
         summarise paper {conversation}\n",
        "Cite sources, keep it short. ".repeat(20)
    );
    for turn in 1..turns {
        prompt.push_str(&format!(
            "<|assistant|>part {turn} of {conversation}\n<|user|>and part {turn}?\n"
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

fn busy_config(depth: u64) -> CacheAwareConfig {
    CacheAwareConfig {
        later_turn_escape_in_flight: depth,
        ..Default::default()
    }
}

/// Each worker with (this replica's in-flight, reported (running, queued) or None).
fn loaded(policy: &CacheAwarePolicy, loads: &[WorkerLoad<'_>]) -> Vec<Candidate> {
    let ring = policy.membership.ring();
    loads
        .iter()
        .map(|&(name, in_flight, gauge)| Candidate {
            id: ring.id_of(name).unwrap(),
            in_flight,
            reported: gauge.map(|(running, queued)| ReportedLoad { running, queued }),
        })
        .collect()
}

/// Every worker at `in_flight` 2 and silent, except `hot` at `hot_in_flight`.
fn private_view(policy: &CacheAwarePolicy, hot: &str, hot_in_flight: u64) -> Vec<Candidate> {
    let loads: Vec<WorkerLoad<'_>> = NAMES
        .iter()
        .map(|&name| (name, if name == hot { hot_in_flight } else { 2 }, None))
        .collect();
    loaded(policy, &loads)
}

fn name(policy: &CacheAwarePolicy, decision: &Decision) -> String {
    policy
        .membership
        .ring()
        .name_of(decision.worker)
        .unwrap()
        .to_string()
}

/// Opens conversation `id` on `policy` with every worker equally loaded; returns its home.
fn open(policy: &CacheAwarePolicy, id: usize) -> String {
    let first = policy
        .select(&anonymous(&chat(id, 1)), &private_view(policy, NAMES[0], 2))
        .unwrap();
    assert_eq!(first.branch, HASH_PLACEMENT);
    name(policy, &first)
}

#[test]
fn a_full_batch_at_home_sends_the_later_turn_to_a_lighter_worker_and_it_stays_there() {
    let recorder = Arc::new(Recorder::default());
    let policy = replica_with(0, recorder.clone(), busy_config(BATCH));
    let home = open(&policy, 5);
    // One below the batch: the turn stays (a prefix hit).
    let stays = policy
        .select(
            &anonymous(&chat(5, 2)),
            &private_view(&policy, &home, BATCH - 1),
        )
        .unwrap();
    assert_eq!(
        (name(&policy, &stays), stays.branch),
        (home.clone(), PREFIX_HIT)
    );
    // A full batch: the next turn would wait for a slot, so it leaves.
    let moved = policy
        .select(
            &anonymous(&chat(5, 3)),
            &private_view(&policy, &home, BATCH),
        )
        .unwrap();
    assert_eq!(moved.branch, BUSY_ESCAPE);
    let target = name(&policy, &moved);
    assert_ne!(target, home);
    assert_eq!(policy.stats().load_moves, 1);
    // Announced as a load move, so replicas sharing events follow it.
    let events = recorder.take();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].reason, events[0].worker.as_str()),
        (AffinityReason::LoadMove, target.as_str())
    );
    // The conversation now lives there, even once the old home is quiet again.
    let next = policy
        .select(&anonymous(&chat(5, 4)), &private_view(&policy, &home, 0))
        .unwrap();
    assert_eq!(name(&policy, &next), target);
    assert_ne!(next.branch, BUSY_ESCAPE);
}

#[test]
fn the_target_is_the_first_worker_clockwise_carrying_at_most_half_the_load() {
    let policy = replica_with(0, Arc::new(DiscardAffinity), busy_config(BATCH));
    let home = open(&policy, 9);
    let second = chat(9, 2);
    // Every other worker above half the home's load: the turn stays.
    let crowded: Vec<WorkerLoad<'_>> = NAMES
        .iter()
        .map(|&n| (n, if n == home { 10 } else { 6 }, None))
        .collect();
    let stays = policy
        .select(&anonymous(&second), &loaded(&policy, &crowded))
        .unwrap();
    assert_eq!(
        (name(&policy, &stays), stays.branch),
        (home.clone(), PREFIX_HIT)
    );
    // Exactly one at half: that one, wherever it sits on the ring.
    let spare = NAMES.iter().copied().rev().find(|&n| n != home).unwrap();
    let one_light: Vec<WorkerLoad<'_>> = NAMES
        .iter()
        .map(|&n| match n {
            n if n == home => (n, 10, None),
            n if n == spare => (n, 5, None),
            n => (n, 6, None),
        })
        .collect();
    let moved = policy
        .select(&anonymous(&second), &loaded(&policy, &one_light))
        .unwrap();
    assert_eq!(
        (name(&policy, &moved), moved.branch),
        (spare.to_string(), BUSY_ESCAPE)
    );
}

#[test]
fn the_engines_reported_load_counts_when_it_exceeds_this_replicas_share() {
    // One of three replicas: its own in-flight count on the home is 2, but the engine reports
    // a full batch running (every replica's requests) and nobody waiting yet.
    let policy = replica_with(0, Arc::new(DiscardAffinity), busy_config(BATCH));
    let home = open(&policy, 13);
    let view: Vec<WorkerLoad<'_>> = NAMES
        .iter()
        .map(|&n| (n, 2, Some(if n == home { (BATCH, 0) } else { (3, 0) })))
        .collect();
    let moved = policy
        .select(&anonymous(&chat(13, 2)), &loaded(&policy, &view))
        .unwrap();
    assert_eq!(moved.branch, BUSY_ESCAPE);
    assert_ne!(name(&policy, &moved), home);
    // A lighter worker is judged the same way: reported 5 is too much against a home at 8.
    let other = replica_with(0, Arc::new(DiscardAffinity), busy_config(BATCH));
    let other_home = open(&other, 13);
    let heavy: Vec<WorkerLoad<'_>> = NAMES
        .iter()
        .map(|&n| {
            (
                n,
                2,
                Some(if n == other_home { (BATCH, 0) } else { (5, 0) }),
            )
        })
        .collect();
    let stays = other
        .select(&anonymous(&chat(13, 2)), &loaded(&other, &heavy))
        .unwrap();
    assert_eq!(
        (name(&other, &stays), stays.branch),
        (other_home, PREFIX_HIT)
    );
}

#[test]
fn off_by_default_and_never_for_a_first_turn() {
    let policy = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let home = open(&policy, 21);
    let kept = policy
        .select(&anonymous(&chat(21, 2)), &private_view(&policy, &home, 30))
        .unwrap();
    assert_eq!((name(&policy, &kept), kept.branch), (home, PREFIX_HIT));
    // A first turn is placed by the opening bound (load_move, not busy_escape).
    let on = replica_with(0, Arc::new(DiscardAffinity), busy_config(BATCH));
    let probe = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let owner = open(&probe, 22);
    let first = on
        .select(&anonymous(&chat(22, 1)), &private_view(&on, &owner, 30))
        .unwrap();
    assert_eq!(first.branch, LOAD_MOVE);
    assert_eq!(policy.stats().load_moves, 0);
}

#[test]
fn with_no_depth_set_the_batch_an_engine_showed_is_the_depth() {
    for learn in [true, false] {
        let config = CacheAwareConfig {
            later_turn_escape_learned: learn,
            ..Default::default()
        };
        let policy = replica_with(0, Arc::new(DiscardAffinity), config);
        let home = open(&policy, 9);
        // This replica's in-flight count on home, and home's gauges (running, queued); every
        // other worker 1 in flight, 1 running, none queued.
        let view = |hot: u64, gauge: (u64, u64)| -> Vec<Candidate> {
            let loads: Vec<WorkerLoad<'_>> = NAMES
                .iter()
                .map(|&name| match name == home {
                    true => (name, hot, Some(gauge)),
                    false => (name, 1, Some((1, 0))),
                })
                .collect();
            loaded(&policy, &loads)
        };
        let turn = |turns: usize, view: &[Candidate]| {
            let decision = policy.select(&anonymous(&chat(9, turns)), view).unwrap();
            (name(&policy, &decision), decision.branch)
        };
        // Nothing learned yet: a turn stays however busy its worker is.
        assert_eq!(turn(2, &view(12, (12, 0))), (home.clone(), PREFIX_HIT));
        // Another conversation's opening meets home showing its batch: 6 running, 2 waiting.
        policy
            .select(&anonymous(&chat(10, 1)), &view(6, (6, 2)))
            .unwrap();
        // Below the learned batch the turn stays; at it, it leaves (if learning is on).
        assert_eq!(turn(3, &view(5, (5, 0))), (home.clone(), PREFIX_HIT));
        let (worker, branch) = turn(4, &view(6, (6, 0)));
        if learn {
            assert_eq!(branch, BUSY_ESCAPE);
            assert_ne!(worker, home);
        } else {
            assert_eq!((worker, branch), (home, PREFIX_HIT));
        }
    }
}
