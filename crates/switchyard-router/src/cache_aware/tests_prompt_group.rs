//! Conversations placed within their system prompt's group of workers: every replica fed the
//! same requests and load view decides alike, a popular prompt spreads over several workers
//! while a rare one keeps one, later turns follow the conversation on a replica that never
//! saw it, a first turn over the load bound spills down the prompt's ranking and says so,
//! where replicas share their placements that bound reads the fleet's load, and a fresh
//! replica plans after a few conversations.

use super::tests_affinity::{NAMES, Recorder, fleet, idle_except};
use super::*;
use crate::{
    AffinityEvent, AffinityReason, ConsistentHashConfig, DiscardAffinity, RoutingKeyConfig,
};
use std::collections::{BTreeMap, BTreeSet};
use switchyard_core::ManualClock;

/// A long system prompt per application (over `prompt_group_min_bytes`).
fn system_prompt(app: usize) -> String {
    format!(
        "<|system|>You are assistant {app} of a support desk. {}\n",
        "Answer from the knowledge base, cite the article, stay polite. ".repeat(24)
    )
}

pub(super) fn chat(app: usize, conversation: usize, turns: usize) -> String {
    let mut prompt = format!(
        "{}<|user|>ticket {conversation}: my order {conversation} has not arrived\n",
        system_prompt(app)
    );
    for turn in 1..turns {
        prompt.push_str(&format!(
            "<|assistant|>checking order {conversation}, step {turn}\n<|user|>any news {turn}?\n"
        ));
    }
    prompt
}

/// A replica on its own manual clock, so plans are rebuilt as time passes. These tests feed
/// each replica every opening, as no replica fed at random is: a first turn keeps to the
/// draw every replica shares (no balancing of cache writes, see `tests_group_balance`).
fn replica(id_base: u32, sink: Arc<dyn AffinitySink>) -> (CacheAwarePolicy, Arc<ManualClock>) {
    let config = CacheAwareConfig {
        prompt_group_balance: false,
        ..Default::default()
    };
    replica_with(config, id_base, sink)
}

pub(super) fn replica_with(
    config: CacheAwareConfig,
    id_base: u32,
    sink: Arc<dyn AffinitySink>,
) -> (CacheAwarePolicy, Arc<ManualClock>) {
    let manual = Arc::new(ManualClock::new());
    let clock = WallClock::new(manual.clone(), Duration::from_secs(1_700_000_000));
    let policy = CacheAwarePolicy::new(
        config,
        &ConsistentHashConfig::default(),
        RoutingKeyConfig::default(),
        clock,
        sink,
    )
    .unwrap();
    for (offset, name) in (0u32..4).zip(NAMES).rev() {
        policy.worker_added(WorkerId(id_base + offset), name);
    }
    (policy, manual)
}

pub(super) fn routed(
    policy: &CacheAwarePolicy,
    prompt: &str,
    candidates: &[Candidate],
) -> (String, Decision) {
    let request = RouteRequest {
        prompt,
        session_id: None,
        user: None,
    };
    let decision = policy.select(&request, candidates).unwrap();
    let ring = policy.membership.ring();
    (ring.name_of(decision.worker).unwrap().to_string(), decision)
}

/// Application of conversation `n`: 0 for 85 %, 1 for 10 %, 2 for 5 %.
fn app_of(n: usize) -> usize {
    match n % 20 {
        0..=16 => 0,
        17 | 18 => 1,
        _ => 2,
    }
}

/// A load view that varies by request but stays within the opening bound everywhere.
fn loads_at(step: usize) -> Vec<(&'static str, u64)> {
    (0..4)
        .map(|w| (NAMES[w], ((step + w) % 2) as u64))
        .collect()
}

#[test]
fn replicas_fed_the_same_requests_and_load_view_place_alike_and_follow_unseen_conversations() {
    let (a, clock_a) = replica(0, Arc::new(DiscardAffinity));
    let (b, clock_b) = replica(50, Arc::new(DiscardAffinity));
    // A third replica sees the same mix of prompts but other conversations: its plan matches,
    // its prefix tree holds none of the conversations below.
    let (c, clock_c) = replica(90, Arc::new(DiscardAffinity));
    let mut homes = BTreeMap::new();
    for n in 0..400 {
        for clock in [&clock_a, &clock_b, &clock_c] {
            clock.advance(Duration::from_millis(50));
        }
        let loads = loads_at(n);
        let opening = chat(app_of(n), n, 1);
        let (on_a, decision) = routed(&a, &opening, &fleet(&a, &loads));
        let (on_b, on_b_decision) = routed(&b, &opening, &fleet(&b, &loads));
        assert_eq!(
            (&on_a, decision.branch),
            (&on_b, on_b_decision.branch),
            "{n}"
        );
        assert_eq!(decision.branch, PROMPT_GROUP, "{n}");
        routed(&c, &chat(app_of(n), 10_000 + n, 1), &fleet(&c, &loads));
        homes.insert(n, on_a);
    }
    // Later turns of the last conversations, sent to the replica that never saw them, under
    // another load view: they go where the conversation lives.
    for n in 300..400 {
        for turns in 2..4 {
            let (on_c, decision) = routed(&c, &chat(app_of(n), n, turns), &idle_except(&c, &[]));
            assert_eq!(&on_c, &homes[&n], "conversation {n}, turn {turns}");
            // Its second turn by the group plan, the third as a continuation of the second.
            let expected = if turns == 2 { PROMPT_GROUP } else { PREFIX_HIT };
            assert_eq!(decision.branch, expected);
            // The replica that placed it follows its own record of the previous turn.
            let (on_a, decision) = routed(&a, &chat(app_of(n), n, turns), &idle_except(&a, &[]));
            assert_eq!((&on_a, decision.branch), (&homes[&n], PREFIX_HIT));
        }
    }
}

#[test]
fn a_popular_system_prompt_spreads_over_several_workers_and_a_rare_one_keeps_one() {
    let (policy, clock) = replica(0, Arc::new(DiscardAffinity));
    let mut workers_of: BTreeMap<usize, BTreeSet<String>> = BTreeMap::new();
    let mut per_worker: BTreeMap<String, usize> = BTreeMap::new();
    for n in 0..600 {
        clock.advance(Duration::from_millis(50));
        let (worker, _) = routed(&policy, &chat(app_of(n), n, 1), &idle_except(&policy, &[]));
        // Once the shares have settled (the plan is rebuilt every second).
        if n >= 200 {
            workers_of
                .entry(app_of(n))
                .or_default()
                .insert(worker.clone());
            *per_worker.entry(worker).or_insert(0) += 1;
        }
    }
    // 85 % of the traffic needs more than three workers' even share: more than one worker.
    assert!(workers_of[&0].len() >= 3, "{workers_of:?}");
    // 10 % and 5 % fit within one worker each.
    assert_eq!(workers_of[&1].len(), 1, "{workers_of:?}");
    assert_eq!(workers_of[&2].len(), 1, "{workers_of:?}");
    // And the workers stay evenly loaded (400 conversations, 100 each on average).
    assert_eq!(per_worker.len(), 4, "{per_worker:?}");
    assert!(
        per_worker
            .values()
            .all(|&count| (60..=140).contains(&count)),
        "{per_worker:?}"
    );
    let snapshot = policy.stats();
    assert_eq!(snapshot.load_moves, 0);
}

#[test]
fn switched_off_every_prompt_spreads_over_the_whole_ring() {
    let policy = CacheAwarePolicy::new(
        CacheAwareConfig {
            prompt_groups: false,
            ..Default::default()
        },
        &ConsistentHashConfig::default(),
        RoutingKeyConfig::default(),
        super::tests_affinity::frozen_clock(),
        Arc::new(DiscardAffinity),
    )
    .unwrap();
    for (offset, name) in (0u32..4).zip(NAMES) {
        policy.worker_added(WorkerId(offset), name);
    }
    let rare: BTreeSet<String> = (0..200)
        .filter(|&n| app_of(n) == 2)
        .map(|n| routed(&policy, &chat(2, n, 1), &idle_except(&policy, &[])).0)
        .collect();
    assert_eq!(rare.len(), 4, "{rare:?}");
}

#[test]
fn a_first_turn_over_the_load_bound_spills_down_the_ranking_and_is_announced() {
    let recorder = Arc::new(Recorder::default());
    let (policy, clock) = replica(0, recorder.clone());
    // Settle a plan: one prompt only, so it is planned over every worker.
    for n in 0..40 {
        clock.advance(Duration::from_millis(50));
        routed(&policy, &chat(0, n, 1), &idle_except(&policy, &[]));
    }
    recorder.take();
    // Find a new conversation whose group worker is then loaded far over the bound.
    let mut spilled = 0;
    for n in 40..80 {
        let (home, _) = routed(&policy, &chat(0, n, 1), &idle_except(&policy, &[]));
        recorder.take();
        // The same opening again, as a different conversation would not be: a fresh replica.
        let (other, other_clock) = replica(10, recorder.clone());
        for m in 0..40 {
            other_clock.advance(Duration::from_millis(50));
            routed(&other, &chat(0, m, 1), &idle_except(&other, &[]));
        }
        recorder.take();
        let hot: Vec<(&str, u64)> = NAMES
            .iter()
            .map(|&name| (name, if name == home { 20 } else { 0 }))
            .collect();
        let (worker, decision) = routed(&other, &chat(0, n, 1), &fleet(&other, &hot));
        assert_ne!(worker, home);
        assert_eq!(decision.branch, PROMPT_GROUP_SPILL);
        let events = recorder.take();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(
            (events[0].reason, events[0].worker.as_str()),
            (AffinityReason::LoadMove, worker.as_str())
        );
        spilled += 1;
        if spilled == 3 {
            break;
        }
    }
    assert_eq!(spilled, 3);
}

/// A replica alone whose plan has settled on 40 openings of prompt 0.
fn settled_replica() -> CacheAwarePolicy {
    let (policy, clock) = replica(0, Arc::new(DiscardAffinity));
    for m in 1000..1040 {
        clock.advance(Duration::from_millis(50));
        routed(&policy, &chat(0, m, 1), &idle_except(&policy, &[]));
    }
    policy
}

/// Where a settled plan puts the opening of conversation `n` of prompt 0, and a load view
/// with `hot` requests in flight there and none elsewhere.
fn group_worker_carrying(n: usize, hot: u64) -> (String, Vec<(&'static str, u64)>) {
    let probe = settled_replica();
    let (home, _) = routed(&probe, &chat(0, n, 1), &idle_except(&probe, &[]));
    let view = NAMES
        .iter()
        .map(|&name| (name, if name == home { hot } else { 0 }))
        .collect();
    (home, view)
}

#[test]
fn a_first_turn_keeps_its_group_worker_below_the_bounds_floor() {
    // Each first turn on a fresh replica with a settled plan, its group worker carrying
    // `hot` of this replica's requests and the others none: the factor bound alone would
    // refuse from 2 (⌈2.0 × (hot + 1) / 4⌉), the floor keeps it up to 3.
    let decide = |n: usize, hot: u64| {
        let policy = settled_replica();
        let (home, view) = group_worker_carrying(n, hot);
        let (worker, decision) = routed(&policy, &chat(0, n, 1), &fleet(&policy, &view));
        (worker == home, decision.branch)
    };
    for n in 0..5 {
        for hot in 2..=3 {
            assert_eq!(decide(n, hot), (true, PROMPT_GROUP), "{n} at {hot}");
        }
        assert_eq!(decide(n, 4), (false, PROMPT_GROUP_SPILL), "{n} at 4");
    }
}

#[test]
fn where_placements_are_shared_a_first_turn_still_reads_this_replicas_own_counts() {
    // Two replicas settle the same plan: one alone, one whose every announcement comes back
    // through the (simulated) ledger together with four other replicas' records.
    let recorder = Arc::new(Recorder::default());
    let (shared, clock) = replica(0, recorder.clone());
    let (alone, alone_clock) = replica(0, Arc::new(DiscardAffinity));
    for m in 1000..1040 {
        clock.advance(Duration::from_millis(50));
        alone_clock.advance(Duration::from_millis(50));
        routed(&shared, &chat(0, m, 1), &idle_except(&shared, &[]));
        routed(&alone, &chat(0, m, 1), &idle_except(&alone, &[]));
        for event in recorder.take() {
            shared.apply_affinity(&event);
            for other in 1..5u64 {
                let theirs = AffinityEvent {
                    prefix_key: event.prefix_key ^ (other << 40),
                    ..event.clone()
                };
                shared.apply_affinity(&theirs);
            }
        }
    }
    let replicas = shared.stats().placement_replicas;
    assert!((replicas - 5.0).abs() < 0.01, "{replicas}");
    assert_eq!(alone.stats().placement_replicas, 1.0);
    // A new conversation whose group worker carries `hot` of the replica's own requests and
    // the others none: both keep it below the floor of 4 (read as the fleet's 5 × hot, the
    // shared one would spill at 1) and both spill it at the floor.
    for n in 0..5 {
        for (k, (hot, stays)) in [(1, true), (3, true), (4, false)].into_iter().enumerate() {
            let n = 3 * n + k;
            let (home, view) = group_worker_carrying(n, hot);
            for policy in [&alone, &shared] {
                let (worker, decision) = routed(policy, &chat(0, n, 1), &fleet(policy, &view));
                let expected = if stays {
                    PROMPT_GROUP
                } else {
                    PROMPT_GROUP_SPILL
                };
                assert_eq!(
                    (worker == home, decision.branch),
                    (stays, expected),
                    "{n} at {hot}"
                );
            }
        }
    }
}

#[test]
fn an_independent_replica_that_missed_the_previous_turn_follows_placement_not_its_own_move() {
    // Where its prompt's group puts conversation 7, learnt on a replica that routes nothing else.
    let (probe, _) = replica(200, Arc::new(DiscardAffinity));
    let (home, _) = routed(&probe, &chat(0, 7, 1), &idle_except(&probe, &[]));
    let hot: Vec<(&str, u64)> = NAMES
        .iter()
        .map(|&name| (name, if name == home { 4 } else { 0 }))
        .collect();
    for routes_turn_two in [false, true] {
        // Two replicas fed at random that share nothing; the opening meets a load view on A
        // that sends it elsewhere.
        let (a, _) = replica(0, Arc::new(DiscardAffinity));
        let (b, _) = replica(50, Arc::new(DiscardAffinity));
        let (opened_on, decision) = routed(&a, &chat(0, 7, 1), &fleet(&a, &hot));
        assert_eq!(decision.branch, PROMPT_GROUP_SPILL);
        assert_ne!(opened_on, home);
        if routes_turn_two {
            // A routed the previous turn itself: the conversation stays where A moved it.
            let (second, decision) = routed(&a, &chat(0, 7, 2), &idle_except(&a, &[]));
            assert_eq!((&second, decision.branch), (&opened_on, PREFIX_HIT));
            continue;
        }
        // B never saw the opening: the second turn goes where placement says.
        let (second, _) = routed(&b, &chat(0, 7, 2), &idle_except(&b, &[]));
        assert_eq!(second, home);
        // A's tree and its own move still name the opening's worker, but the turn since went
        // to placement: the third follows it there instead of moving the conversation back.
        let (third, decision) = routed(&a, &chat(0, 7, 3), &idle_except(&a, &[]));
        assert_eq!((&third, decision.branch), (&home, PROMPT_GROUP));
        // And A, which routed that one, keeps the conversation there.
        let (fourth, decision) = routed(&a, &chat(0, 7, 4), &idle_except(&a, &[]));
        assert_eq!((&fourth, decision.branch), (&home, PREFIX_HIT));
    }
}

#[test]
fn a_fresh_replica_plans_after_a_few_conversations_so_an_opening_burst_spreads() {
    // A replica that cannot yet tell whether it routes whole waits for the plan; the burst
    // of openings of one busy prompt meanwhile all takes that prompt's first worker.
    let (policy, clock) = replica(0, Arc::new(DiscardAffinity));
    let mut warm_up = BTreeSet::new();
    let mut first_sixteen = BTreeSet::new();
    for n in 0..16 {
        // All within the fleet's first second, every conversation of the busy prompt.
        clock.advance(Duration::from_millis(20));
        let (worker, decision) = routed(&policy, &chat(0, n, 1), &idle_except(&policy, &[]));
        assert_eq!(decision.branch, PROMPT_GROUP, "{n}");
        if n + 1 < prompt_group::MIN_PLAN_CONVERSATIONS {
            warm_up.insert(worker.clone());
        }
        first_sixteen.insert(worker);
    }
    assert_eq!(warm_up.len(), 1, "{warm_up:?}");
    // Planned, the one prompt carrying every turn takes every worker, and it is planned
    // early in the burst: a warm-up of 32 conversations kept all sixteen on one worker.
    assert!(first_sixteen.len() >= 3, "{first_sixteen:?}");
}
