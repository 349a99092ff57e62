//! Later turns leaving a worker whose engine reports a queue: every replica, from the same
//! scraped gauges, sends the turn to the same unsaturated worker; nothing moves without a
//! queue, without gauges, with the escape off, or when no other worker is better.

use super::tests_affinity::{NAMES, Recorder, replica_with};
use super::*;
use crate::{AffinityReason, DiscardAffinity, ReportedLoad};

fn chat(conversation: usize, turns: usize) -> String {
    let mut prompt = format!(
        "<|system|>You are a careful coding agent. {}\n<|user|>task {conversation}: fix the \
         build of project {conversation}\n",
        "Read files, run tools, answer briefly. ".repeat(20)
    );
    for turn in 1..turns {
        prompt.push_str(&format!(
            "<|assistant|>did step {turn} of {conversation}\n<|user|>go on with step {turn}\n"
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

/// Every worker with the same private in-flight count; `gauges` gives (name, running,
/// queued) as the engines report them, None for a worker that reports nothing.
fn reporting(policy: &CacheAwarePolicy, gauges: &[(&str, Option<(u64, u64)>)]) -> Vec<Candidate> {
    let ring = policy.membership.ring();
    gauges
        .iter()
        .map(|&(name, gauge)| Candidate {
            id: ring.id_of(name).unwrap(),
            in_flight: 1,
            reported: gauge.map(|(running, queued)| ReportedLoad { running, queued }),
        })
        .collect()
}

/// All four workers reporting `running` 2 and no queue, except `hot` with (running, queued).
fn quiet_except(policy: &CacheAwarePolicy, hot: &str, load: (u64, u64)) -> Vec<Candidate> {
    let gauges: Vec<(&str, Option<(u64, u64)>)> = NAMES
        .iter()
        .map(|&name| (name, Some(if name == hot { load } else { (2, 0) })))
        .collect();
    reporting(policy, &gauges)
}

fn name(policy: &CacheAwarePolicy, decision: &Decision) -> String {
    policy
        .membership
        .ring()
        .name_of(decision.worker)
        .unwrap()
        .to_string()
}

/// Opens conversation `id` on `policy` with every worker quiet; returns its home.
fn open(policy: &CacheAwarePolicy, id: usize) -> String {
    let quiet = quiet_except(policy, NAMES[0], (2, 0));
    let first = policy.select(&anonymous(&chat(id, 1)), &quiet).unwrap();
    assert_eq!(first.branch, HASH_PLACEMENT);
    name(policy, &first)
}

#[test]
fn a_saturated_home_sends_the_later_turn_where_every_replica_sends_it() {
    let recorder = Arc::new(Recorder::default());
    let a = replica_with(0, recorder.clone(), CacheAwareConfig::default());
    let b = replica_with(40, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let home = open(&a, 7);
    // The second turn on A (a prefix hit there): the home reports 3 waiting for a slot.
    let second = chat(7, 2);
    let on_a = a
        .select(&anonymous(&second), &quiet_except(&a, &home, (8, 3)))
        .unwrap();
    assert_eq!(on_a.branch, LOAD_ESCAPE);
    let target = name(&a, &on_a);
    assert_ne!(target, home);
    // B never saw the conversation (a hash placement there): same gauges, same target.
    let on_b = b
        .select(&anonymous(&second), &quiet_except(&b, &home, (8, 3)))
        .unwrap();
    assert_eq!(
        (name(&b, &on_b), on_b.branch),
        (target.clone(), LOAD_ESCAPE)
    );
    // The move is announced like a load move, and A follows it while the old home recovers.
    let events = recorder.take();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].reason, events[0].worker.as_str()),
        (AffinityReason::LoadMove, target.as_str())
    );
    assert_eq!(a.stats().load_moves, 1);
    let third = a
        .select(&anonymous(&chat(7, 3)), &quiet_except(&a, &home, (2, 0)))
        .unwrap();
    assert_eq!(name(&a, &third), target);
}

#[test]
fn the_target_is_the_first_worker_clockwise_with_no_queue_and_less_load() {
    let policy = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let home = open(&policy, 3);
    let second = chat(3, 2);
    // Every other worker queued too, or as loaded as the home: the turn stays home.
    let all_queued: Vec<(&str, Option<(u64, u64)>)> =
        NAMES.iter().map(|&n| (n, Some((8, 2)))).collect();
    let stays = policy
        .select(&anonymous(&second), &reporting(&policy, &all_queued))
        .unwrap();
    assert_eq!(
        (name(&policy, &stays), stays.branch),
        (home.clone(), PREFIX_HIT)
    );
    let as_loaded: Vec<(&str, Option<(u64, u64)>)> = NAMES
        .iter()
        .map(|&n| (n, Some(if n == home { (8, 1) } else { (9, 0) })))
        .collect();
    let stays = policy
        .select(&anonymous(&second), &reporting(&policy, &as_loaded))
        .unwrap();
    assert_eq!(name(&policy, &stays), home);
    // Only one other worker has room: that one, whatever the ring order.
    let spare = NAMES.iter().copied().find(|&n| n != home).unwrap();
    let one_free: Vec<(&str, Option<(u64, u64)>)> = NAMES
        .iter()
        .map(|&n| (n, Some(if n == spare { (1, 0) } else { (8, 2) })))
        .collect();
    let moved = policy
        .select(&anonymous(&second), &reporting(&policy, &one_free))
        .unwrap();
    assert_eq!(
        (name(&policy, &moved), moved.branch),
        (spare.to_string(), LOAD_ESCAPE)
    );
}

#[test]
fn no_queue_no_gauges_a_first_turn_or_the_escape_off_never_move() {
    let policy = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let home = open(&policy, 11);
    let second = chat(11, 2);
    // Full batch but nobody waiting: still home.
    let full = policy
        .select(&anonymous(&second), &quiet_except(&policy, &home, (8, 0)))
        .unwrap();
    assert_eq!(
        (name(&policy, &full), full.branch),
        (home.clone(), PREFIX_HIT)
    );
    // The home publishes no gauges: the private view alone never moves a later turn.
    let silent: Vec<(&str, Option<(u64, u64)>)> = NAMES
        .iter()
        .map(|&n| (n, if n == home { None } else { Some((0, 0)) }))
        .collect();
    let stays = policy
        .select(&anonymous(&second), &reporting(&policy, &silent))
        .unwrap();
    assert_eq!(name(&policy, &stays), home);
    // A first turn is placed by the opening bound, not escaped.
    let fresh = chat(12, 1);
    let owner = replica_with(0, Arc::new(DiscardAffinity), CacheAwareConfig::default());
    let owner_home = open(&owner, 12);
    let first = policy
        .select(
            &anonymous(&fresh),
            &quiet_except(&policy, &owner_home, (8, 4)),
        )
        .unwrap();
    assert_ne!(first.branch, LOAD_ESCAPE);
    // Switched off (and the busy escape on the batch the gauges show): the saturated home
    // keeps its later turns.
    let off = replica_with(
        0,
        Arc::new(DiscardAffinity),
        CacheAwareConfig {
            later_turn_escape_queued: 0,
            later_turn_escape_learned: false,
            ..Default::default()
        },
    );
    let off_home = open(&off, 11);
    let kept = off
        .select(&anonymous(&second), &quiet_except(&off, &off_home, (8, 5)))
        .unwrap();
    assert_eq!((name(&off, &kept), kept.branch), (off_home, PREFIX_HIT));
    assert_eq!(policy.stats().load_moves, 0);
}
