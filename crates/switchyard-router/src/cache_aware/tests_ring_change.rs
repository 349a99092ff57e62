//! Independent replicas fed at random across a worker leaving or joining: the conversations in
//! progress stay where they are (but the departed worker's), as they do where replicas share
//! placements, and only the conversations opened after the change take the new plan.

use super::tests_affinity::NAMES;
use super::tests_prompt_group::{chat, replica_with, routed};
use super::*;
use crate::DiscardAffinity;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use switchyard_core::ManualClock;

const REPLICAS: usize = 3;
const CONVERSATIONS: usize = 48;
/// Between two requests of the fleet: each conversation sends a turn every 2.4 s.
const STEP: Duration = Duration::from_millis(50);

/// Application of conversation `n`: three system prompts, the first the busiest.
fn app_of(n: usize) -> usize {
    match n % 10 {
        0..=5 => 0,
        6 | 7 => 1,
        _ => 2,
    }
}

/// Per conversation, the worker and decision branch of each of its turns sent.
type Sent = BTreeMap<usize, Vec<(String, &'static str)>>;

struct Fleet {
    replicas: Vec<(CacheAwarePolicy, Arc<ManualClock>)>,
    rng: SmallRng,
    /// Worker names each replica knows, in the order the candidates are listed.
    workers: Vec<String>,
}

impl Fleet {
    fn new(seed: u64) -> Self {
        let replicas = (0..REPLICAS)
            .map(|r| {
                let config = CacheAwareConfig {
                    prompt_group_balance: false,
                    ..Default::default()
                };
                replica_with(config, r as u32 * 100, Arc::new(DiscardAffinity))
            })
            .collect();
        Self {
            replicas,
            rng: SmallRng::seed_from_u64(seed),
            workers: NAMES.iter().map(|n| n.to_string()).collect(),
        }
    }

    /// Turn `turn` of conversation `n` on a replica drawn at random, every worker idle.
    fn send(&mut self, n: usize, turn: usize) -> (String, &'static str) {
        for (_, clock) in &self.replicas {
            clock.advance(STEP);
        }
        let (policy, _) = &self.replicas[self.rng.random_range(0..REPLICAS)];
        let ring = policy.membership.ring();
        let candidates: Vec<Candidate> = self
            .workers
            .iter()
            .map(|name| Candidate {
                id: ring.id_of(name).unwrap(),
                in_flight: 0,
                reported: None,
            })
            .collect();
        let (worker, decision) = routed(policy, &chat(app_of(n), n, turn), &candidates);
        (worker, decision.branch)
    }

    /// Every conversation sends its turns `turns`, one conversation after another.
    fn rounds(
        &mut self,
        conversations: std::ops::Range<usize>,
        turns: std::ops::RangeInclusive<usize>,
    ) -> Sent {
        let mut sent: BTreeMap<usize, Vec<_>> = BTreeMap::new();
        for turn in turns {
            for n in conversations.clone() {
                let placed = self.send(n, turn);
                sent.entry(n).or_default().push(placed);
            }
        }
        sent
    }

    /// Two generations of conversations opened and ended, so every replica's plan settled.
    fn settled(seed: u64) -> Self {
        let mut fleet = Self::new(seed);
        fleet.rounds(1000..1000 + CONVERSATIONS, 1..=6);
        fleet.rounds(2000..2000 + CONVERSATIONS, 1..=6);
        fleet
    }

    fn remove(&mut self, name: &str) {
        for (policy, _) in &self.replicas {
            let id = policy.membership.ring().id_of(name).unwrap();
            policy.worker_removed(id);
        }
        self.workers.retain(|worker| worker != name);
    }

    fn add(&mut self, name: &str) {
        for (r, (policy, _)) in self.replicas.iter().enumerate() {
            policy.worker_added(WorkerId(r as u32 * 100 + 50), name);
        }
        self.workers.push(name.to_string());
    }
}

/// The membership change a test makes between a conversation's fourth and fifth turns.
#[derive(Clone, Copy, PartialEq)]
enum Change {
    /// None: the control, whose moves are the replicas' plans disagreeing anyway.
    Nothing,
    Leave,
    Join,
}

/// What the conversations in progress did across `change` on a settled fleet (`seed`).
struct Across {
    /// Conversations on one worker until the change, that worker staying, whose next turns
    /// left it.
    moved: usize,
    /// Turns placed by the plan before the change.
    by_old_plan: usize,
    /// Conversations on the departed worker, all of whose next turns went elsewhere.
    departed_held: usize,
    fleet: Fleet,
}

fn across(seed: u64, change: Change) -> Across {
    let mut fleet = Fleet::settled(seed);
    let before = fleet.rounds(0..CONVERSATIONS, 1..=4);
    // The worker of the first conversation leaves (in the control, stays).
    let departed = before[&0].last().unwrap().0.clone();
    match change {
        Change::Nothing => {}
        Change::Leave => fleet.remove(&departed),
        Change::Join => fleet.add("gpu-e"),
    }
    let after = fleet.rounds(0..CONVERSATIONS, 5..=7);
    let mut across = Across {
        moved: 0,
        by_old_plan: 0,
        departed_held: 0,
        fleet,
    };
    for (n, turns) in &before {
        let whole = turns.iter().all(|(worker, _)| *worker == turns[0].0);
        let next = &after[n];
        across.by_old_plan += next
            .iter()
            .filter(|(_, branch)| *branch == PROMPT_GROUP_BEFORE_CHANGE)
            .count();
        let home = &turns[turns.len() - 1].0;
        let left = next.iter().any(|(worker, _)| worker != home);
        if change == Change::Leave && *home == departed {
            assert!(next.iter().all(|(worker, _)| *worker != departed));
            across.departed_held += 1;
        } else if whole && left {
            across.moved += 1;
        }
    }
    across
}

/// Replicas' plans disagree a little even without a change (their share estimates differ by
/// the conversations one of them has not met), so each seed's moves are compared with a
/// control that changes nothing (13 over these seeds). Without the plan before the change, a
/// leave or a join moved 8–10 conversations per seed here beyond those; with it, fewer than the
/// control (a frozen plan does not drift).
const SEEDS: std::ops::Range<u64> = 0..8;
const SLACK_OVER_SEEDS: usize = 4;

#[test]
fn a_worker_leaving_moves_only_its_own_conversations_in_progress() {
    let (mut moved, mut control, mut by_old_plan) = (0, 0, 0);
    for seed in SEEDS {
        let left = across(seed, Change::Leave);
        assert!(left.departed_held > 0, "seed {seed}");
        moved += left.moved;
        by_old_plan += left.by_old_plan;
        control += across(seed, Change::Nothing).moved;
    }
    assert!(
        moved <= control + SLACK_OVER_SEEDS,
        "{moved} moved against {control}"
    );
    // The new plans drew some conversations that stayed to other workers: those turns went
    // by the old plan, which is what kept them.
    assert!(by_old_plan > 0, "the re-plans moved nothing to keep");
}

#[test]
fn a_worker_joining_takes_new_conversations_and_moves_none_in_progress() {
    let (mut moved, mut control) = (0, 0);
    for seed in SEEDS {
        let joined = across(seed, Change::Join);
        assert!(
            joined.by_old_plan > 0,
            "seed {seed}: the join re-planned nothing"
        );
        moved += joined.moved;
        control += across(seed, Change::Nothing).moved;
        // Conversations opened after the join take the plan with the new worker in it.
        let mut fleet = joined.fleet;
        let opened_after = fleet.rounds(CONVERSATIONS..2 * CONVERSATIONS, 1..=3);
        let on_new = opened_after
            .values()
            .filter(|turns| turns[0].0 == "gpu-e")
            .count();
        assert!(
            on_new > 0,
            "seed {seed}: the new worker took no conversation"
        );
        let by_old_plan = opened_after
            .values()
            .flatten()
            .filter(|(_, branch)| *branch == PROMPT_GROUP_BEFORE_CHANGE)
            .count();
        assert_eq!(
            by_old_plan, 0,
            "seed {seed}: a new conversation took the old plan"
        );
    }
    assert!(
        moved <= control + SLACK_OVER_SEEDS,
        "{moved} moved against {control}"
    );
}
