//! Least load: the candidate with the fewest requests in flight; ties rotate.

use crate::load::LeastLoaded;
use crate::policy::{Candidate, Decision, RouteRequest, RoutingPolicy};

const LEAST_LOAD: &str = "least_load";

#[derive(Debug, Default)]
pub struct LeastLoadPolicy {
    chooser: LeastLoaded,
}

impl LeastLoadPolicy {
    pub const NAME: &'static str = "least_load";

    pub fn new() -> Self {
        Self::default()
    }
}

impl RoutingPolicy for LeastLoadPolicy {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn select(&self, _request: &RouteRequest<'_>, candidates: &[Candidate]) -> Option<Decision> {
        Some(Decision {
            worker: self.chooser.pick(candidates)?,
            branch: LEAST_LOAD,
            prefix_match: None,
            key_source: None,
        })
    }

    fn branches(&self) -> &'static [&'static str] {
        &[LEAST_LOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::WorkerId;

    #[test]
    fn picks_the_fewest_in_flight_and_rotates_ties() {
        let policy = LeastLoadPolicy::new();
        let fleet = |loads: &[u64]| -> Vec<Candidate> {
            (0u32..)
                .zip(loads)
                .map(|(id, &in_flight)| Candidate {
                    id: WorkerId(id),
                    in_flight,
                    reported: None,
                })
                .collect()
        };
        let request = RouteRequest::default();
        let decision = policy.select(&request, &fleet(&[4, 1, 3])).unwrap();
        assert_eq!(
            (decision.worker, decision.branch),
            (WorkerId(1), "least_load")
        );
        let tied = fleet(&[0, 5, 0]);
        let picks: Vec<u32> = (0..4)
            .map(|_| policy.select(&request, &tied).unwrap().worker.0)
            .collect();
        assert!(picks.iter().all(|&w| w == 0 || w == 2));
        assert!(picks.contains(&0) && picks.contains(&2), "{picks:?}");
        assert!(policy.select(&request, &[]).is_none());
    }
}
