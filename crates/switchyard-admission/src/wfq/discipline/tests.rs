use super::*;

const WEIGHTS: [f64; 3] = [5.0, 2.0, 1.0];
const MINIMUMS: [f64; 3] = [0.40, 0.15, 0.05];

fn caller(name: &str) -> Arc<str> {
    Arc::from(name)
}

fn backlog(
    core: &mut WfqCore,
    class: Priority,
    callers: &[&str],
    per_caller: u64,
    next_id: &mut u64,
) {
    for _ in 0..per_caller {
        for name in callers {
            core.push(*next_id, class, caller(name));
            *next_id += 1;
        }
    }
}

fn shares_of(core: &mut WfqCore, pops: usize) -> [f64; 3] {
    let mut counts = [0usize; 3];
    for _ in 0..pops {
        let (_, class) = core.pop().unwrap();
        counts[class.index()] += 1;
    }
    counts.map(|c| c as f64 * 100.0 / pops as f64)
}

fn assert_near(actual: [f64; 3], expected: [f64; 3], tolerance: f64) {
    for i in 0..3 {
        assert!(
            (actual[i] - expected[i]).abs() <= tolerance,
            "P{i}: {:.2} % vs {:.2} % expected (all: {actual:?})",
            actual[i],
            expected[i]
        );
    }
}

#[test]
fn effective_shares_normalise_weights_and_raise_minimums() {
    let all = effective_shares(WEIGHTS, MINIMUMS, [true; 3]);
    assert_near(all.map(|s| s * 100.0), [62.5, 25.0, 12.5], 1e-9);
    let only_p2 = effective_shares(WEIGHTS, MINIMUMS, [false, false, true]);
    assert_eq!(only_p2, [0.0, 0.0, 1.0]);
    let skewed = effective_shares([100.0, 2.0, 1.0], MINIMUMS, [true; 3]);
    assert_near(skewed.map(|s| s * 100.0), [80.0, 15.0, 5.0], 1e-9);
}

#[test]
fn saturated_classes_share_slots_by_weight() {
    let mut core = WfqCore::new(WEIGHTS, MINIMUMS);
    let mut id = 0;
    for class in Priority::ALL {
        backlog(&mut core, class, &["a", "b", "c"], 400, &mut id);
    }
    assert_near(shares_of(&mut core, 1_000), [62.5, 25.0, 12.5], 3.0);
    // Holds over short windows too, not just on average.
    assert_near(shares_of(&mut core, 80), [62.5, 25.0, 12.5], 3.0);
}

#[test]
fn minimum_guarantees_hold_when_p0_floods() {
    let mut core = WfqCore::new([100.0, 2.0, 1.0], MINIMUMS);
    let mut id = 0;
    backlog(&mut core, Priority::P0, &["flood"], 10_000, &mut id);
    backlog(&mut core, Priority::P1, &["b"], 1_000, &mut id);
    backlog(&mut core, Priority::P2, &["c"], 1_000, &mut id);
    let shares = shares_of(&mut core, 2_000);
    assert_near(shares, [80.0, 15.0, 5.0], 1.0);

    let mut default = WfqCore::new(WEIGHTS, MINIMUMS);
    backlog(&mut default, Priority::P0, &["flood"], 10_000, &mut id);
    backlog(&mut default, Priority::P2, &["c"], 1_000, &mut id);
    let shares = shares_of(&mut default, 1_200);
    assert!(shares[2] >= 5.0, "P2 keeps its floor: {shares:?}");
    assert_near(shares, [83.3, 0.0, 16.7], 1.0);
}

#[test]
fn callers_of_one_class_take_turns() {
    let mut core = WfqCore::new(WEIGHTS, MINIMUMS);
    let mut id = 0;
    backlog(&mut core, Priority::P1, &["heavy"], 100, &mut id);
    backlog(&mut core, Priority::P1, &["light"], 10, &mut id);
    let mut served = Vec::new();
    for _ in 0..20 {
        let (id, _) = core.pop().unwrap();
        served.push(if id < 100 { "heavy" } else { "light" });
    }
    assert_eq!(
        served.iter().filter(|c| **c == "light").count(),
        10,
        "{served:?}"
    );
    assert!(
        served.windows(2).all(|w| w[0] != w[1]),
        "alternating: {served:?}"
    );
    assert_eq!(core.pop().map(|(id, _)| id < 100), Some(true));
}

#[test]
fn removed_waiters_are_never_served() {
    let mut core = WfqCore::new(WEIGHTS, MINIMUMS);
    core.push(1, Priority::P1, caller("a"));
    core.push(2, Priority::P1, caller("b"));
    core.push(3, Priority::P1, caller("a"));
    assert!(core.remove(2));
    assert!(!core.remove(2), "only once");
    assert_eq!(core.pop(), Some((1, Priority::P1)));
    assert_eq!(core.pop(), Some((3, Priority::P1)));
    assert_eq!(core.pop(), None);
    assert_eq!(core.total(), 0);
}

#[test]
fn paused_class_is_skipped_and_banks_no_credit() {
    let mut core = WfqCore::new(WEIGHTS, MINIMUMS);
    let mut id = 0;
    backlog(&mut core, Priority::P0, &["a"], 1_000, &mut id);
    backlog(&mut core, Priority::P2, &["c"], 1_000, &mut id);
    core.set_paused(Priority::P2, true);
    assert_eq!(shares_of(&mut core, 200), [100.0, 0.0, 0.0]);
    assert_eq!(core.len(Priority::P2), 1_000, "P2 waits, untouched");
    core.set_paused(Priority::P2, false);
    let after = shares_of(&mut core, 60);
    assert_near(after, [83.3, 0.0, 16.7], 3.5);
}

#[test]
fn minimum_shares_hold_under_every_mix_of_backlogged_classes() {
    let weight_sets = [
        [5.0, 2.0, 1.0],
        [100.0, 2.0, 1.0],
        [1.0, 1.0, 100.0],
        [1.0, 100.0, 1.0],
    ];
    let minimum_sets = [MINIMUMS, [0.2, 0.2, 0.2], [0.0, 0.0, 0.5]];
    for weights in weight_sets {
        for minimums in minimum_sets {
            for mask in 1u8..8 {
                let backlogged = [0, 1, 2].map(|i| mask & (1 << i) != 0);
                let mut core = WfqCore::new(weights, minimums);
                let mut id = 0;
                for class in Priority::ALL.into_iter().filter(|c| backlogged[c.index()]) {
                    backlog(&mut core, class, &["a", "b"], 2_000, &mut id);
                }
                let shares = shares_of(&mut core, 2_000);
                let case = format!("weights {weights:?} minimums {minimums:?} mix {backlogged:?}");
                assert!((shares.iter().sum::<f64>() - 100.0).abs() < 1e-9, "{case}");
                for i in 0..3 {
                    if !backlogged[i] {
                        assert_eq!(shares[i], 0.0, "{case}");
                        continue;
                    }
                    assert!(
                        shares[i] >= minimums[i] * 100.0 - 0.5,
                        "P{i} got {:.2} % under its minimum: {case}",
                        shares[i]
                    );
                }
                if backlogged == [true, false, false] {
                    assert_eq!(shares[0], 100.0, "P0 alone borrows everything");
                }
            }
        }
    }
}

#[test]
fn a_class_flagged_below_its_guarantee_goes_first_and_is_charged_for_it() {
    let mut core = WfqCore::new(WEIGHTS, MINIMUMS);
    let mut id = 0;
    for class in Priority::ALL {
        backlog(&mut core, class, &["a"], 100, &mut id);
    }
    assert_eq!(
        core.pop_first([false, false, true]).map(|(_, c, g)| (c, g)),
        Some((Priority::P2, true))
    );
    assert_eq!(
        core.pop_first([false, true, true]).map(|(_, c, g)| (c, g)),
        Some((Priority::P1, true)),
        "most urgent flagged class first"
    );
    // Without flags the stride order resumes with P2 and P1 already charged, so the next
    // eight dispatches are P0-heavy, not a catch-up burst for P2.
    let next: Vec<Priority> = (0..8).filter_map(|_| core.pop().map(|(_, c)| c)).collect();
    assert!(
        next.iter().filter(|c| **c == Priority::P2).count() <= 1,
        "{next:?}"
    );
    assert!(
        next.iter().filter(|c| **c == Priority::P0).count() >= 5,
        "{next:?}"
    );
}

#[test]
fn the_newest_waiter_of_a_less_urgent_class_is_the_one_shed() {
    let mut core = WfqCore::new(WEIGHTS, MINIMUMS);
    core.push(1, Priority::P2, caller("a"));
    core.push(2, Priority::P1, caller("a"));
    core.push(3, Priority::P2, caller("b"));
    core.push(4, Priority::P2, caller("a"));
    assert_eq!(core.least_urgent_below(Priority::P0), Some(Priority::P2));
    assert_eq!(core.least_urgent_below(Priority::P2), None);
    assert_eq!(core.remove_newest(Priority::P2), Some(4));
    assert_eq!(core.remove_newest(Priority::P2), Some(3));
    assert_eq!(core.remove_newest(Priority::P2), Some(1));
    assert_eq!(core.least_urgent_below(Priority::P0), Some(Priority::P1));
    assert_eq!(core.remove_newest(Priority::P0), None);
    assert_eq!(core.total(), 1);
}

#[test]
fn eligible_means_pop_first_has_an_answer() {
    let mut core = WfqCore::new(WEIGHTS, MINIMUMS);
    let first = [false; 3];
    assert!(!core.any_eligible(), "empty");
    assert_eq!(core.pop_first(first), None);
    core.push(1, Priority::P2, caller("a"));
    core.set_paused(Priority::P2, true);
    assert!(!core.any_eligible(), "only a paused class waits");
    assert_eq!(core.pop_first(first), None);
    core.set_paused(Priority::P2, false);
    assert!(core.any_eligible());
    assert_eq!(core.pop_first(first), Some((1, Priority::P2, false)));
    assert!(!core.any_eligible(), "served");
    core.push(2, Priority::P1, caller("a"));
    assert!(core.remove(2));
    assert!(!core.any_eligible(), "removed");
}
