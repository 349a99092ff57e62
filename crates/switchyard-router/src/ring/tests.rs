use super::movement::moved_share;
use super::*;
use crate::hash::stable_hash;
use crate::load::{CandidateLoads, LoadBound};
use crate::policy::Candidate;

fn names(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("worker-{i}")).collect()
}

fn ring_of(names: &[String], vnodes: u32) -> Ring {
    Ring::build(
        (0u32..).zip(names).map(|(i, name)| Member {
            id: WorkerId(i),
            name: Arc::from(name.as_str()),
        }),
        vnodes,
    )
}

fn owner_name(ring: &Ring, key: &str) -> Arc<str> {
    let member = ring.owner(stable_hash(key.as_bytes())).unwrap();
    ring.member(member).unwrap().name.clone()
}

fn keys(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("session-{i}")).collect()
}

#[test]
fn keys_spread_evenly_over_eight_workers_with_256_vnodes() {
    let ring = ring_of(&names(8), 256);
    assert_eq!(ring.vnode_count(), 8 * 256);
    let mut counts = std::collections::HashMap::new();
    for key in keys(100_000) {
        *counts.entry(owner_name(&ring, &key)).or_insert(0u64) += 1;
    }
    assert_eq!(counts.len(), 8);
    let mean = 100_000.0 / 8.0;
    let variance = counts
        .values()
        .map(|&c| (c as f64 - mean).powi(2))
        .sum::<f64>()
        / 8.0;
    let cv = variance.sqrt() / mean;
    assert!(cv < 0.1, "coefficient of variation {cv}");
}

#[test]
fn adding_or_removing_one_of_n_workers_moves_about_one_nth_of_keys() {
    let all = names(9);
    let eight = ring_of(&all[..8], 256);
    let nine = ring_of(&all, 256);
    let keys = keys(50_000);
    let moved = keys
        .iter()
        .filter(|k| owner_name(&eight, k) != owner_name(&nine, k))
        .count() as f64
        / keys.len() as f64;
    // Ideal is 1/9 ≈ 0.111; every moved key must land on the newcomer.
    assert!((moved - 1.0 / 9.0).abs() < 0.03, "moved {moved}");
    for key in &keys {
        let (before, after) = (owner_name(&eight, key), owner_name(&nine, key));
        assert!(before == after || after.as_ref() == "worker-8");
    }
    // The sweep estimate agrees with the sampled share, in both directions.
    let estimate = moved_share(&eight, &nine);
    assert!((estimate - moved).abs() < 0.01, "{estimate} vs {moved}");
    assert_eq!(moved_share(&nine, &eight), estimate);

    // Removing a worker other than the last: only its keys move.
    let without_3: Vec<String> = all.iter().filter(|n| *n != "worker-3").cloned().collect();
    let eight_again = ring_of(&without_3, 256);
    for key in &keys {
        let (before, after) = (owner_name(&nine, key), owner_name(&eight_again, key));
        assert!(before == after || before.as_ref() == "worker-3");
    }
    assert!((moved_share(&nine, &eight_again) - 1.0 / 9.0).abs() < 0.03);
}

#[test]
fn ring_depends_on_names_not_ids_or_insertion_order() {
    let a = ring_of(&names(5), 64);
    let mut reversed = names(5);
    reversed.reverse();
    let b = ring_of(&reversed, 64);
    assert_eq!(moved_share(&a, &b), 0.0);
    for key in keys(1_000) {
        assert_eq!(owner_name(&a, &key), owner_name(&b, &key));
    }
}

#[test]
fn nth_distinct_walks_to_successive_different_workers() {
    let ring = ring_of(&names(4), 32);
    let hash = stable_hash(b"hot");
    let owners: Vec<u32> = (0..4)
        .map(|n| ring.points[ring.nth_distinct_from(hash, n)].member)
        .collect();
    assert_eq!(owners[0], ring.owner(hash).unwrap());
    let mut distinct = owners.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 4, "{owners:?}");
    // Wraps around the worker count.
    assert_eq!(
        ring.nth_distinct_from(hash, 5),
        ring.nth_distinct_from(hash, 1)
    );
}

fn candidate(ring: &Ring, name: &str, in_flight: u64) -> Candidate {
    Candidate {
        id: ring.id_of(name).unwrap(),
        in_flight,
        reported: None,
    }
}

#[test]
fn place_skips_filtered_and_overloaded_workers_in_ring_order() {
    let ring = ring_of(&names(3), 64);
    let hash = stable_hash(b"some key");
    let start = ring.successor(hash);
    let order: Vec<Arc<str>> = (0..3)
        .map(|n| {
            let member = ring.points[ring.nth_distinct_from(hash, n)].member;
            ring.member(member).unwrap().name.clone()
        })
        .collect();
    let all_idle: Vec<Candidate> = order.iter().map(|n| candidate(&ring, n, 0)).collect();
    let place = |candidates: &[Candidate], factor: f64| {
        let loads = CandidateLoads::new(&ring, candidates);
        let placed = loads.place(&ring, start, LoadBound::new(candidates, factor))?;
        Some((ring.member(placed.member)?.name.clone(), placed))
    };
    let (name, placed) = place(&all_idle, 1.25).unwrap();
    assert_eq!(name, order[0]);
    assert!(!placed.skipped_filtered && !placed.skipped_load);

    // The owner is filtered: the next distinct worker clockwise takes it.
    let (name, placed) = place(&all_idle[1..], 1.25).unwrap();
    assert_eq!(name, order[1]);
    assert!(placed.skipped_filtered && !placed.skipped_load);

    // The owner is over the bound: total 10, cap = ceil(1.25 × 11 / 3) = 5.
    let loaded = [
        candidate(&ring, &order[0], 5),
        candidate(&ring, &order[1], 4),
        candidate(&ring, &order[2], 1),
    ];
    let (name, placed) = place(&loaded, 1.25).unwrap();
    assert_eq!(name, order[1]);
    assert!(placed.skipped_load && !placed.skipped_filtered);
    // A looser factor keeps the owner.
    assert_eq!(place(&loaded, 2.0).unwrap().0, order[0]);

    // No ring worker is a candidate.
    let stranger = [Candidate {
        id: WorkerId(99),
        in_flight: 0,
        reported: None,
    }];
    assert!(place(&stranger, 1.25).is_none());
}
