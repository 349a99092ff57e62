//! Round robin: spreads requests evenly and ignores caches and load.

use crate::policy::{Candidate, Decision, RouteRequest, RoutingPolicy};
use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug, Default)]
pub struct RoundRobinPolicy {
    next: AtomicUsize,
}

impl RoundRobinPolicy {
    pub const NAME: &'static str = "round_robin";
    const BRANCH: &'static str = "round_robin";

    pub fn new() -> Self {
        Self::default()
    }
}

impl RoutingPolicy for RoundRobinPolicy {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn select(&self, _request: &RouteRequest<'_>, candidates: &[Candidate]) -> Option<Decision> {
        if candidates.is_empty() {
            return None;
        }
        // Relaxed is enough: the counter only has to spread requests, not order them.
        let turn = self.next.fetch_add(1, Ordering::Relaxed);
        let chosen = candidates.get(turn % candidates.len())?;
        Some(Decision {
            worker: chosen.id,
            branch: Self::BRANCH,
            prefix_match: None,
            key_source: None,
        })
    }

    fn branches(&self) -> &'static [&'static str] {
        &[Self::BRANCH]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::WorkerId;

    fn candidates(ids: &[u32]) -> Vec<Candidate> {
        ids.iter()
            .map(|&id| Candidate {
                id: WorkerId(id),
                in_flight: 0,
                reported: None,
            })
            .collect()
    }

    #[test]
    fn cycles_over_candidates_in_order() {
        let policy = RoundRobinPolicy::new();
        let request = RouteRequest {
            prompt: "hello",
            ..Default::default()
        };
        let workers = candidates(&[7, 3, 9]);
        let picked: Vec<u32> = (0..6)
            .map(|_| policy.select(&request, &workers).unwrap().worker.0)
            .collect();
        assert_eq!(picked, vec![7, 3, 9, 7, 3, 9]);
        let decision = policy.select(&request, &workers).unwrap();
        assert_eq!(decision.branch, "round_robin");
        assert!(policy.branches().contains(&decision.branch));
        assert!(decision.prefix_match.is_none());
    }

    #[test]
    fn empty_candidates_yield_none() {
        let policy = RoundRobinPolicy::new();
        let request = RouteRequest {
            prompt: "hello",
            ..Default::default()
        };
        assert!(policy.select(&request, &[]).is_none());
    }
}
