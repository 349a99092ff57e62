//! How much of the conversations' traffic a re-plan of the system prompts' groups sends to
//! another worker.
//!
//! Where a conversation's later turns follow the plan rather than where its opening went
//! (replicas fed at random that share no placements), every re-plan moves the conversations
//! in progress whose draw it changes: drifting prompt shares move a few each time, a worker
//! leaving moves its own conversations and those a re-balanced plan shifts between the
//! workers that stay. An operator reads that churn from gauges; it is estimated from a fixed
//! sample of conversation positions per prompt, so a re-plan pays a small, bounded cost.

use super::group_shares::GroupShares;
use super::slot_draw::{Plans, drawn, higher_first};
use crate::hash::stable_hash_seeded;
use crate::ring::Ring;
use switchyard_core::WorkerId;

/// The busiest prompts sampled: they carry most of the traffic a re-plan can move.
const SAMPLED_PROMPTS: usize = 16;
/// Conversation positions drawn per sampled prompt at a re-plan on the same ring (every
/// second: cheap, about ±0.04 on the share).
pub(super) const SAMPLES_PER_PROMPT: u64 = 32;
/// The same at a re-plan on a ring change, which is rare and whose figure is kept (±0.015).
pub(super) const SAMPLES_ON_RING_CHANGE: u64 = 256;

/// What a re-plan moved, as shares of the sampled prompts' traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Churn {
    /// Drawn to another worker than before.
    pub(super) moved: f64,
    /// Of those, moved between two workers on both rings: beyond what a worker leaving or
    /// joining forces (its own conversations out, its share in).
    pub(super) between_stayers: f64,
}

/// Of the traffic of the busiest prompts planned both `before` and `after` (each a ring and
/// the plan built on it), the share whose drawn worker differs, weighted by `shares`, from
/// `samples` conversation positions per prompt; None when no such prompt carries any share.
pub(super) fn churn(
    before: (&Ring, &Plans),
    after: (&Ring, &Plans),
    shares: &GroupShares,
    samples: u64,
) -> Option<Churn> {
    let mut prompts: Vec<(f64, u64)> = after
        .1
        .keys()
        .filter(|group| before.1.contains_key(group))
        .map(|&group| (shares.share(group), group))
        .collect();
    prompts.sort_unstable_by(higher_first);
    prompts.truncate(SAMPLED_PROMPTS);
    let sampled: f64 = prompts.iter().map(|&(share, _)| share).sum();
    if sampled <= 0.0 {
        return None;
    }
    let stayed = |worker: Option<WorkerId>, ring: &Ring| {
        worker.is_some_and(|worker| ring.member_index(worker).is_some())
    };
    let samples = samples.max(1);
    let mut churn = Churn::default();
    for (share, group) in prompts {
        let (Some(old), Some(new)) = (before.1.get(&group), after.1.get(&group)) else {
            continue;
        };
        let (mut moved, mut between_stayers) = (0u64, 0u64);
        for sample in 0..samples {
            let conversation = position(group, sample);
            let was = drawn(before.0, old, conversation);
            let is = drawn(after.0, new, conversation);
            if was != is {
                moved += 1;
                between_stayers += u64::from(stayed(was, after.0) && stayed(is, before.0));
            }
        }
        let weight = share / samples as f64 / sampled;
        churn.moved += weight * moved as f64;
        churn.between_stayers += weight * between_stayers as f64;
    }
    Some(churn)
}

/// The `sample`th sampled conversation position of prompt `group`.
pub(super) fn position(group: u64, sample: u64) -> u64 {
    stable_hash_seeded(&sample.to_le_bytes(), group)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache_aware::slot_draw::Slot;
    use crate::ring::Member;
    use std::sync::Arc;
    use std::time::Duration;

    fn ring(workers: &[u32]) -> Ring {
        Ring::build(
            workers.iter().map(|&w| Member {
                id: WorkerId(w),
                name: Arc::from(format!("worker-{w}")),
            }),
            16,
        )
    }

    fn shares(counts: &[(u64, u32)]) -> GroupShares {
        let mut shares = GroupShares::new(Duration::from_secs(60), 16, 16);
        for &(group, count) in counts {
            for _ in 0..count {
                shares.record(group, Duration::ZERO);
            }
        }
        shares
    }

    fn plans(entries: &[(u64, Vec<Slot>)]) -> Plans {
        entries.iter().cloned().collect()
    }

    #[test]
    fn the_same_plan_moves_nothing() {
        let ring = ring(&[0, 1, 2, 3]);
        let plan = plans(&[(1, vec![(0, 2.0), (1, 2.0)]), (2, vec![(2, 4.0)])]);
        let shares = shares(&[(1, 3), (2, 1)]);
        assert_eq!(
            churn((&ring, &plan), (&ring, &plan), &shares, 64),
            Some(Churn::default())
        );
    }

    #[test]
    fn a_slot_dropped_moves_exactly_the_conversations_it_drew() {
        let ring = ring(&[0, 1, 2, 3]);
        let before = plans(&[(1, vec![(0, 2.0), (1, 2.0)])]);
        let after = plans(&[(1, vec![(0, 2.0)])]);
        let on_dropped = (0..SAMPLES_PER_PROMPT)
            .filter(|&s| drawn(&ring, &before[&1], position(1, s)) == Some(WorkerId(1)))
            .count();
        assert!((8..=24).contains(&on_dropped), "{on_dropped}");
        let one = shares(&[(1, 1)]);
        let churn =
            churn((&ring, &before), (&ring, &after), &one, SAMPLES_PER_PROMPT).expect("common");
        let expected = on_dropped as f64 / SAMPLES_PER_PROMPT as f64;
        assert!((churn.moved - expected).abs() < 1e-12, "{churn:?}");
        // Every worker is on both rings: all of it is beyond what a membership change forces.
        assert_eq!(churn.between_stayers, churn.moved);
    }

    #[test]
    fn a_worker_leaving_moves_at_least_its_own_and_prompts_are_weighted_by_share() {
        // Worker 3 leaves: prompt 1 loses its slot there, prompt 2 (on worker 2 alone) keeps
        // its worker. Member indices differ between the two rings; workers are compared.
        let four = ring(&[0, 1, 2, 3]);
        let three = ring(&[0, 1, 2]);
        let index = |ring: &Ring, w: u32| ring.member_index(WorkerId(w)).unwrap();
        let before = plans(&[
            (1, vec![(index(&four, 0), 2.0), (index(&four, 3), 2.0)]),
            (2, vec![(index(&four, 2), 4.0)]),
        ]);
        let after = plans(&[
            (1, vec![(index(&three, 0), 2.0), (index(&three, 1), 1.0)]),
            (2, vec![(index(&three, 2), 3.0)]),
        ]);
        let samples = 128;
        let on_departed = (0..samples)
            .filter(|&s| drawn(&four, &before[&1], position(1, s)) == Some(WorkerId(3)))
            .count() as f64
            / samples as f64;
        assert!(on_departed > 0.2, "{on_departed}");
        // Prompt 1 carries three quarters of the traffic, prompt 2 (unmoved) the rest.
        let both = shares(&[(1, 3), (2, 1)]);
        let churn = churn((&four, &before), (&three, &after), &both, samples).expect("common");
        let forced = 0.75 * on_departed;
        assert!(churn.moved >= forced - 1e-12, "{churn:?}");
        assert!(churn.moved <= 0.75 + 1e-12, "{churn:?}");
        // What drew the departed worker had to move; the rest moved between the stayers.
        assert!(
            (churn.between_stayers - (churn.moved - forced)).abs() < 1e-9,
            "{churn:?} {forced}"
        );
        // Only the prompt that changed counts when it is the only one sampled.
        let one = shares(&[(1, 1)]);
        let alone = super::churn((&four, &before), (&three, &after), &one, samples).expect("one");
        assert!((alone.moved - churn.moved / 0.75).abs() < 1e-9, "{alone:?}");
    }

    #[test]
    fn no_prompt_planned_on_both_sides_gives_no_figure() {
        let ring = ring(&[0, 1]);
        let before = plans(&[(1, vec![(0, 4.0)])]);
        let after = plans(&[(2, vec![(1, 4.0)])]);
        let shares = shares(&[(1, 1), (2, 1)]);
        assert_eq!(churn((&ring, &before), (&ring, &after), &shares, 8), None);
        let none = GroupShares::new(Duration::from_secs(60), 16, 16);
        assert_eq!(churn((&ring, &before), (&ring, &before), &none, 8), None);
    }
}
