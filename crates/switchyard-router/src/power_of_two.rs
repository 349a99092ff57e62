//! Power of two choices: sample two distinct candidates at random, send to the less busy.
//! Nearly as balanced as least-loaded, without every gateway replica herding onto the same
//! momentarily idle worker.

use crate::policy::{Candidate, Decision, RouteRequest, RoutingPolicy};
use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

const POWER_OF_TWO: &str = "power_of_two";
const SINGLE_CANDIDATE: &str = "single_candidate";
const BRANCHES: &[&str] = &[POWER_OF_TWO, SINGLE_CANDIDATE];

#[derive(Debug)]
pub struct PowerOfTwoPolicy {
    /// SplitMix64 state: one atomic add per draw, so concurrent selects never lock.
    state: AtomicU64,
}

impl PowerOfTwoPolicy {
    pub const NAME: &'static str = "power_of_two";

    /// Seeded from the process's random hasher keys.
    pub fn new() -> Self {
        Self::with_seed(RandomState::new().hash_one(0x5EED_u64))
    }

    /// A reproducible sequence of choices, for tests and simulations.
    pub fn with_seed(seed: u64) -> Self {
        Self {
            state: AtomicU64::new(seed),
        }
    }

    fn next_random(&self) -> u64 {
        const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut z = self
            .state
            .fetch_add(GAMMA, Ordering::Relaxed)
            .wrapping_add(GAMMA);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl Default for PowerOfTwoPolicy {
    fn default() -> Self {
        Self::new()
    }
}

/// Maps 32 random bits onto 0..n without a division (Lemire's multiply-shift).
fn below(random: u32, n: usize) -> usize {
    ((u64::from(random) * n as u64) >> 32) as usize
}

impl RoutingPolicy for PowerOfTwoPolicy {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn select(&self, _request: &RouteRequest<'_>, candidates: &[Candidate]) -> Option<Decision> {
        let (worker, branch) = match candidates {
            [] => return None,
            [only] => (only.id, SINGLE_CANDIDATE),
            _ => {
                let random = self.next_random();
                let n = candidates.len();
                let first = below(random as u32, n);
                let mut second = below((random >> 32) as u32, n - 1);
                if second >= first {
                    second += 1;
                }
                let (a, b) = (candidates.get(first)?, candidates.get(second)?);
                // Ties keep the first draw, itself random.
                let winner = if b.in_flight < a.in_flight { b } else { a };
                (winner.id, POWER_OF_TWO)
            }
        };
        Some(Decision {
            worker,
            branch,
            prefix_match: None,
            key_source: None,
        })
    }

    fn branches(&self) -> &'static [&'static str] {
        BRANCHES
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::WorkerId;

    fn fleet(loads: &[u64]) -> Vec<Candidate> {
        (0u32..)
            .zip(loads)
            .map(|(id, &in_flight)| Candidate {
                id: WorkerId(id),
                in_flight,
                reported: None,
            })
            .collect()
    }

    fn pick(policy: &PowerOfTwoPolicy, candidates: &[Candidate]) -> Decision {
        policy.select(&RouteRequest::default(), candidates).unwrap()
    }

    #[test]
    fn the_busiest_worker_never_wins_and_the_idlest_wins_most() {
        let policy = PowerOfTwoPolicy::with_seed(1);
        let candidates = fleet(&[10, 0, 5, 7]);
        let mut wins = [0u32; 4];
        for _ in 0..4_000 {
            let decision = pick(&policy, &candidates);
            assert_eq!(decision.branch, "power_of_two");
            wins[decision.worker.0 as usize] += 1;
        }
        assert_eq!(wins[0], 0, "the busiest loses every pair it is drawn into");
        // Worker 1 wins every pair it is in: 3 of the 6 equally likely pairs.
        assert!((1_800..2_200).contains(&wins[1]), "{wins:?}");
        // Worker 3 only beats worker 0: 1 pair in 6.
        assert!((520..820).contains(&wins[3]), "{wins:?}");
    }

    #[test]
    fn two_candidates_are_always_distinct_so_the_idle_one_always_wins() {
        let policy = PowerOfTwoPolicy::with_seed(9);
        let candidates = fleet(&[3, 4]);
        for _ in 0..200 {
            assert_eq!(pick(&policy, &candidates).worker, WorkerId(0));
        }
    }

    #[test]
    fn equal_loads_spread_and_single_candidates_are_taken() {
        let policy = PowerOfTwoPolicy::with_seed(3);
        let candidates = fleet(&[2, 2, 2]);
        let mut seen = [false; 3];
        for _ in 0..100 {
            seen[pick(&policy, &candidates).worker.0 as usize] = true;
        }
        assert_eq!(seen, [true; 3]);
        let single = pick(&policy, &fleet(&[50]));
        assert_eq!(
            (single.worker, single.branch),
            (WorkerId(0), "single_candidate")
        );
        assert!(policy.select(&RouteRequest::default(), &[]).is_none());
        // Same seed, same choices.
        let (a, b) = (
            PowerOfTwoPolicy::with_seed(5),
            PowerOfTwoPolicy::with_seed(5),
        );
        for _ in 0..20 {
            assert_eq!(pick(&a, &candidates), pick(&b, &candidates));
        }
    }
}
