//! The group plan as replicas with slightly different share estimates build it.

use super::*;
use crate::cache_aware::slot_draw;
use crate::policy::Candidate;
use crate::ring::Member;

fn ring(workers: u32) -> Arc<Ring> {
    Arc::new(Ring::build(
        (0..workers).map(|w| Member {
            id: WorkerId(w),
            name: Arc::from(format!("worker-{w}")),
        }),
        16,
    ))
}

fn idle(ring: &Ring) -> CandidateLoads {
    let candidates: Vec<Candidate> = ring
        .members()
        .iter()
        .map(|member| Candidate {
            id: member.id,
            in_flight: 0,
            reported: None,
        })
        .collect();
    CandidateLoads::new(ring, &candidates)
}

/// Shares counted from `counts` (prompt, requests).
fn shares_of(counts: &[(u64, f64)]) -> GroupShares {
    let mut shares = GroupShares::new(Duration::from_secs(3600), 4096, 16);
    for &(group, count) in counts {
        for _ in 0..count.round() as u64 {
            shares.record(group, Duration::ZERO);
        }
    }
    shares
}

/// Eight prompts 1..=8 of Zipf popularity over 20 000 requests.
fn zipf_shares() -> GroupShares {
    let zipf: f64 = (1..=8).map(|k| 1.0 / f64::from(k)).sum();
    let counts: Vec<(u64, f64)> = (1..=8u32)
        .map(|k| (u64::from(k), 20_000.0 / f64::from(k) / zipf))
        .collect();
    shares_of(&counts)
}

/// A plan built from `counts` (prompt, requests).
fn plan_of(ring: &Arc<Ring>, counts: &[(u64, f64)]) -> GroupPlan {
    let shares = shares_of(counts);
    let mut plan = GroupPlan::default();
    plan.refresh(
        ring,
        &shares,
        1.0,
        Duration::ZERO,
        Duration::from_secs(1),
        0,
    );
    plan
}

fn units(plan: &GroupPlan, group: u64) -> f64 {
    plan.slots(group, &[]).iter().map(|slot| slot.1).sum()
}

#[test]
fn replicas_whose_estimates_differ_a_little_place_nearly_every_conversation_alike() {
    let ring = ring(4);
    let loads = idle(&ring);
    // Eight prompts, Zipf-popular (one opens about a third of the conversations), as two
    // replicas estimate them from the conversations each happened to see: each share off by
    // up to 3 % of itself. Several prompts then sit across a quarter-worker boundary on one
    // replica and not on the other (e.g. 6.07 against 5.89 units).
    let zipf: f64 = (1..=8).map(|k| 1.0 / f64::from(k)).sum();
    let mut worst = 0.0f64;
    for round in 0..6u32 {
        let wobble = |group: u32, sign: f64| {
            let offset = f64::from((group * 7 + round * 3) % 7) / 6.0 - 0.5;
            1.0 + sign * 0.06 * offset
        };
        let counts = |sign: f64| -> Vec<(u64, f64)> {
            (1..=8u32)
                .map(|k| {
                    let share = 1.0 / f64::from(k) / zipf;
                    (u64::from(k), 20_000.0 * share * wobble(k, sign))
                })
                .collect()
        };
        let (a, b) = (plan_of(&ring, &counts(1.0)), plan_of(&ring, &counts(-1.0)));
        // Share of the fleet's conversations the two replicas send to different workers.
        let mut apart = 0.0;
        for k in 1..=8u64 {
            let share = 1.0 / k as f64 / zipf;
            let ranked = ranking(&ring, k);
            let (slots_a, slots_b) = (a.slots(k, &ranked), b.slots(k, &ranked));
            let differ = (0..2000u64)
                .filter(|&c| {
                    let conversation = k << 32 | c;
                    let on_a = place(
                        &ring,
                        &loads,
                        &slots_a,
                        &ranked,
                        conversation,
                        |_, _| true,
                        None,
                    );
                    let on_b = place(
                        &ring,
                        &loads,
                        &slots_b,
                        &ranked,
                        conversation,
                        |_, _| true,
                        None,
                    );
                    on_a.map(|p| p.0) != on_b.map(|p| p.0)
                })
                .count();
            apart += share * differ as f64 / 2000.0;
        }
        worst = worst.max(apart);
    }
    assert!(worst < 0.05, "{worst}");
}

#[test]
fn no_prompt_takes_a_sliver_of_a_worker() {
    let ring = ring(4);
    // 27 % and 73 %: 4.32 and 11.68 units. The small prompt's remainder beyond its first
    // worker (0.32 units) stays with it rather than copy the prompt onto a second worker.
    let plan = plan_of(&ring, &[(1, 2700.0), (2, 7300.0)]);
    let small = plan.slots(1, &[]);
    assert_eq!(small.len(), 1, "{small:?}");
    assert!((units(&plan, 1) - 4.32).abs() < 1e-9);
    let busy = plan.slots(2, &[]);
    assert_eq!(busy.len(), 3, "{busy:?}");
    assert!(busy.iter().all(|slot| slot.0 != small[0].0), "{busy:?}");
    assert!((units(&plan, 2) - 11.68).abs() < 1e-9);

    // A worker left with less room than half a unit is passed over by the next prompt.
    let first = |group: u64| ranking(&ring, group)[0];
    let (light, heavy) = (1u64..)
        .flat_map(|a| (a + 1..a + 64).map(move |b| (a, b)))
        .find(|&(a, b)| first(a) == first(b))
        .expect("two prompts ranking the same worker first");
    // 3.7 units leave 0.3 on their worker; the heavy prompt (12.3) takes the other three.
    let plan = plan_of(&ring, &[(light, 3700.0), (heavy, 12_300.0)]);
    let heavy_slots = plan.slots(heavy, &[]);
    assert!(
        heavy_slots.iter().all(|slot| slot.0 != first(light)),
        "{heavy_slots:?}"
    );
    assert_eq!(heavy_slots.len(), 3, "{heavy_slots:?}");
    assert!((units(&plan, heavy) - 12.3).abs() < 1e-9);
}

#[test]
fn past_the_planned_prompt_limit_the_busiest_are_planned() {
    let ring = ring(4);
    // One prompt with 40 % of the traffic among 300 rare ones.
    let mut counts: Vec<(u64, f64)> = (1..=300u64).map(|group| (group, 10.0)).collect();
    counts.push((1000, 2000.0));
    let plan = plan_of(&ring, &counts);
    assert!(plan.by_group.contains_key(&1000));
    assert!(
        plan.slots(1000, &[]).len() >= 2,
        "{:?}",
        plan.slots(1000, &[])
    );
    assert_eq!(plan.by_group.len(), MAX_PLANNED_PROMPTS);
}

#[test]
fn a_replica_plans_only_once_it_has_met_enough_conversations() {
    let ring = ring(4);
    let ranking = ranking(&ring, 1);
    let mut shares = GroupShares::new(Duration::from_secs(3600), 4096, 64);
    let mut plan = GroupPlan::default();
    let every = Duration::from_secs(1);
    // Prompt 1 carries every turn: planned, it takes all four workers.
    let mut refresh_after = |conversation: u64, plan: &mut GroupPlan| {
        for turn in 1..=10 {
            shares.observe(1, conversation, turn, Duration::ZERO);
        }
        plan.refresh(&ring, &shares, 1.0, Duration::ZERO, every, 3);
    };
    for conversation in 0..2 {
        refresh_after(conversation, &mut plan);
        // Two conversations met: nothing planned, the prompt's first worker takes it.
        assert_eq!(plan.slots(1, &ranking), vec![(ranking[0], 1.0)]);
    }
    // The refresh that saw too little did not count as a build: the third conversation
    // plans at once, well within `every`.
    refresh_after(2, &mut plan);
    let slots = plan.slots(1, &ranking);
    assert_eq!(slots.len(), 4, "{slots:?}");
    assert!((units(&plan, 1) - 16.0).abs() < 1e-9);
    // Without a minimum the first conversation already plans.
    let mut eager = GroupPlan::default();
    let mut alone = GroupShares::new(Duration::from_secs(3600), 4096, 64);
    alone.observe(1, 0, 1, Duration::ZERO);
    eager.refresh(&ring, &alone, 1.0, Duration::ZERO, every, 0);
    assert_eq!(eager.slots(1, &ranking).len(), 4);
}

#[test]
fn the_plan_logged_names_each_prompt_busiest_first_with_its_workers_and_units() {
    let ring = ring(4);
    let (busy, rare) = (0xabcd_u64 << 48, 0x1234_u64 << 48);
    let counts = [(rare, 25.0), (busy, 75.0)];
    let (shares, plan) = (shares_of(&counts), plan_of(&ring, &counts));
    let described = plan.describe(&ring, &shares);
    let parts: Vec<&str> = described.split("; ").filter(|p| !p.is_empty()).collect();
    assert_eq!(parts.len(), 2, "{described}");
    for (part, (head, group, expected_units)) in parts
        .iter()
        .zip([("abcd 0.750:", busy, 12.0), ("1234 0.250:", rare, 4.0)])
    {
        assert!(part.starts_with(head), "{described}");
        let fields: Vec<&str> = part[head.len()..].split_whitespace().collect();
        let slots = plan.slots(group, &[]);
        assert_eq!(fields.len(), 2 * slots.len(), "{described}");
        let mut logged = 0.0;
        for (pair, &(member, weight)) in fields.chunks(2).zip(&slots) {
            assert_eq!(pair[0], &*ring.member(member).unwrap().name);
            let units: f64 = pair[1].parse().unwrap();
            assert!((units - weight).abs() < 0.006, "{described}");
            logged += units;
        }
        assert!((logged - expected_units).abs() < 0.02, "{described}");
    }
}

#[test]
fn a_re_plan_reports_the_traffic_it_moves_and_a_ring_change_is_kept_apart() {
    // Eight Zipf-popular prompts over four workers, then the fourth worker leaves.
    let shares = zipf_shares();
    let four = ring(4);
    let three = Arc::new(Ring::build(
        (0..3u32).map(|w| Member {
            id: WorkerId(w),
            name: Arc::from(format!("worker-{w}")),
        }),
        16,
    ));
    let mut plan = GroupPlan::default();
    let every = Duration::from_secs(1);
    plan.refresh(&four, &shares, 1.0, Duration::ZERO, every, 0);
    assert_eq!(
        plan.moved_shares(),
        (0.0, 0.0),
        "nothing to compare with yet"
    );
    // The same shares a second later: the same plan, nothing moves.
    plan.refresh(&four, &shares, 1.0, Duration::from_secs(1), every, 0);
    assert_eq!(plan.moved_shares(), (0.0, 0.0));
    // What drew the departed worker had to move; the rest moved between the workers that stayed.
    let before = plan.by_group.clone();
    plan.refresh(&three, &shares, 1.0, Duration::from_millis(1500), every, 0);
    let (moved, beyond) = plan.moved_shares();
    let samples = plan_churn::SAMPLES_ON_RING_CHANGE;
    let departed_drew: f64 = before
        .iter()
        .map(|(&group, slots)| {
            let drew = (0..samples)
                .filter(|&s| {
                    let conversation = plan_churn::position(group, s);
                    slot_draw::drawn(&four, slots, conversation) == Some(WorkerId(3))
                })
                .count();
            shares.share(group) * drew as f64 / samples as f64
        })
        .sum();
    assert!(departed_drew > 0.15, "{departed_drew}");
    assert!(moved >= departed_drew - 1e-9, "{moved} {departed_drew}");
    assert!(
        (beyond - (moved - departed_drew)).abs() < 1e-9,
        "{beyond} {moved}"
    );
    assert!(moved < 1.0, "{moved}");
    // A later re-plan on the same ring and shares moves nothing; the ring change's figure stays.
    plan.refresh(&three, &shares, 1.0, Duration::from_secs(3), every, 0);
    assert_eq!(plan.moved_shares(), (0.0, beyond));
}

#[test]
fn the_plan_before_a_ring_change_draws_for_conversations_opened_under_it() {
    let shares = zipf_shares();
    let four = ring(4);
    let three = ring(3);
    let every = Duration::from_secs(1);
    let mut plan = GroupPlan::default();
    plan.refresh(&four, &shares, 1.0, Duration::ZERO, every, 0);
    let old_draw = |group: u64, conversation: u64| {
        slot_draw::drawn(&four, &plan.slots(group, &[]), conversation)
    };
    let drew: Vec<(u64, u64, Option<WorkerId>)> = (1..=8u64)
        .flat_map(|group| (0..64u64).map(move |c| (group, c)))
        .map(|(group, c)| (group, c, old_draw(group, c)))
        .collect();
    let at = |secs: u64| Duration::from_secs(secs);
    assert_eq!(
        plan.drawn_before_change(1, 0, at(0), |_| true),
        None,
        "no change yet"
    );
    plan.refresh(&three, &shares, 1.0, at(10), every, 0);
    let mut differs = 0;
    for &(group, conversation, old) in &drew {
        let opened_before = |changed_at: Duration| {
            assert_eq!(changed_at, at(10));
            true
        };
        let kept = plan.drawn_before_change(group, conversation, at(20), opened_before);
        assert_eq!(kept, old, "prompt {group}, conversation {conversation}");
        let new = slot_draw::drawn(&three, &plan.slots(group, &[]), conversation);
        differs += usize::from(kept.is_some_and(|w| w != WorkerId(3)) && kept != new);
    }
    assert!(
        differs > 0,
        "the re-plan moved no conversation between stayers"
    );
    // Opened after the change, or asked once the plan is no longer kept: the new plan decides.
    assert_eq!(plan.drawn_before_change(1, 0, at(20), |_| false), None);
    let late = at(10) + PLAN_BEFORE_CHANGE_KEPT + at(1);
    assert_eq!(plan.drawn_before_change(1, 0, late, |_| true), None);
    // A periodic re-plan on the same ring keeps the plan of before the change.
    plan.refresh(&three, &shares, 1.0, at(30), every, 0);
    let (group, conversation, old) = drew[0];
    assert_eq!(
        plan.drawn_before_change(group, conversation, at(31), |_| true),
        old
    );
}
