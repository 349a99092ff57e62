//! Where a conversation of a planned system prompt goes.

use super::*;
use crate::policy::Candidate;
use crate::ring::Member;
use std::sync::Arc;

fn ring(workers: u32) -> Ring {
    Ring::build(
        (0..workers).map(|w| Member {
            id: WorkerId(w),
            name: Arc::from(format!("worker-{w}")),
        }),
        16,
    )
}

fn loads(ring: &Ring, in_flight: &[u64]) -> CandidateLoads {
    let candidates: Vec<Candidate> = (0u32..)
        .zip(in_flight)
        .map(|(w, &in_flight)| Candidate {
            id: WorkerId(w),
            in_flight,
            reported: None,
        })
        .collect();
    CandidateLoads::new(ring, &candidates)
}

#[test]
fn the_plan_fills_each_prompt_over_as_few_workers_as_its_share_needs() {
    let ring = Arc::new(ring(4));
    let mut shares = GroupShares::new(Duration::from_secs(60), 16, 16);
    // 75 %, 15 %, 10 %: 12, 2.4 and 1.6 quarter-worker units of 16.
    for (group, count) in [(1u64, 75), (2, 15), (3, 10)] {
        for _ in 0..count {
            shares.record(group, Duration::ZERO);
        }
    }
    let mut plan = GroupPlan::default();
    plan.refresh(
        &ring,
        &shares,
        1.0,
        Duration::ZERO,
        Duration::from_secs(1),
        0,
    );
    let units = |group: u64| -> f64 { plan.slots(group, &[]).iter().map(|s| s.1).sum() };
    for (group, expected) in [(1, 12.0), (2, 2.4), (3, 1.6)] {
        assert!((units(group) - expected).abs() < 1e-9, "{}", units(group));
    }
    assert!(plan.slots(1, &[]).len() >= 3, "{:?}", plan.slots(1, &[]));
    assert_eq!(plan.slots(2, &[]).len(), 1);
    assert_eq!(plan.slots(3, &[]).len(), 1);
    // Every worker is planned exactly its even share.
    let mut per_worker = [0.0; 4];
    for group in 1..=3 {
        for (member, weight) in plan.slots(group, &[]) {
            per_worker[member as usize] += weight;
        }
    }
    assert!(
        per_worker.iter().all(|&w| (w - 4.0).abs() < 1e-9),
        "{per_worker:?}"
    );
    // Conversations of the busy prompt follow the weights; refused slots spill.
    let idle = loads(&ring, &[0; 4]);
    let slots = plan.slots(1, &[]);
    let ranked = ranking(&ring, 1);
    let mut taken = [0u32; 4];
    for conversation in 0..1200u64 {
        let (worker, how) = place(
            &ring,
            &idle,
            &slots,
            &ranked,
            conversation,
            |_, _| true,
            None,
        )
        .expect("a candidate");
        assert_eq!(how, GroupPlacement::Preferred);
        taken[worker.0 as usize] += 1;
    }
    for &(member, weight) in &slots {
        let expected = 1200.0 * weight / 12.0;
        let got = f64::from(taken[ring.member(member).unwrap().id.0 as usize]);
        assert!(
            (got - expected).abs() < expected * 0.25 + 10.0,
            "{taken:?} {slots:?}"
        );
    }
    let first = place(&ring, &idle, &slots, &ranked, 5, |_, _| true, None)
        .unwrap()
        .0;
    let first = ring.member_index(first).unwrap();
    let (other, how) = place(&ring, &idle, &slots, &ranked, 5, |m, _| m != first, None).unwrap();
    assert_eq!(how, GroupPlacement::Spilled);
    assert_ne!(ring.member_index(other), Some(first));
    assert_eq!(
        place(&ring, &idle, &slots, &ranked, 5, |_, _| false, None),
        None
    );
}

#[test]
fn with_cache_writes_a_first_turn_takes_its_second_draw_when_that_wrote_less() {
    let ring = ring(4);
    let idle = loads(&ring, &[0; 4]);
    let slots: Vec<Slot> = vec![(0, 2.0), (1, 2.0)];
    let ranked = ranking(&ring, 7);
    let member = |worker: WorkerId| ring.member_index(worker).unwrap();
    let even = [1.0, 1.0, 0.0, 0.0];
    let place_with = |conversation: u64, accepts: &dyn Fn(u32, u64) -> bool, written| {
        place(
            &ring,
            &idle,
            &slots,
            &ranked,
            conversation,
            accepts,
            written,
        )
        .map(|(worker, how)| (member(worker), how))
    };
    // Member 0 wrote ten times what member 1 did: every conversation takes member 1, those
    // that drew member 0 first as a balanced placement.
    let written = [10.0, 1.0, 0.0, 0.0];
    let mut balanced = 0;
    for conversation in 0..200u64 {
        let drawn = place_with(conversation, &|_, _| true, None).unwrap();
        let placed = place_with(conversation, &|_, _| true, Some(&written)).unwrap();
        match drawn {
            (0, GroupPlacement::Preferred) => {
                assert_eq!(placed, (1, GroupPlacement::Balanced));
                balanced += 1;
            }
            other => assert_eq!(placed, other),
        }
        // Equal writes, or a second draw the bound refuses: the draw stands.
        assert_eq!(
            place_with(conversation, &|_, _| true, Some(&even)),
            Some(drawn)
        );
        let refuse_one = |m: u32, _| m != 1;
        assert_eq!(
            place_with(conversation, &refuse_one, Some(&written)),
            place_with(conversation, &refuse_one, None)
        );
    }
    assert!((60..=140).contains(&balanced), "{balanced}");
    // A prompt with one worker has nothing to balance.
    let one: Vec<Slot> = vec![(2, 4.0)];
    for conversation in 0..20u64 {
        let placed = place(
            &ring,
            &idle,
            &one,
            &ranked,
            conversation,
            |_, _| true,
            Some(&written),
        );
        assert_eq!(
            placed.map(|(w, how)| (member(w), how)),
            Some((2, GroupPlacement::Preferred))
        );
    }
}
