//! What the detector's inputs say about the moment: healthy, more demand than capacity, or
//! workers in distress. Only distress is a reason to cut capacity; too much demand is met by
//! shedding the excess at full capacity, lowest priority first.

use serde::Serialize;

use super::window::Counts;
use crate::config::DetectorConfig;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Nothing to act on.
    Healthy,
    /// The gateway's own queues refuse work (more requests than dispatch capacity) while
    /// the workers answer normally: shed, but keep dispatching at full capacity.
    DemandOverload,
    /// Too many workers are filtered out (unhealthy, circuit open, TTFT/TPOT beyond the
    /// latency judge's overload marker).
    BackendFiltered,
    /// Too many admitted requests fail (worker errors, upstream timeouts).
    BackendErrors,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::Healthy,
        Verdict::DemandOverload,
        Verdict::BackendFiltered,
        Verdict::BackendErrors,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Healthy => "healthy",
            Verdict::DemandOverload => "demand_overload",
            Verdict::BackendFiltered => "backend_filtered",
            Verdict::BackendErrors => "backend_errors",
        }
    }

    /// Backend distress: the only verdicts that engage the recovery ramp.
    pub fn is_distress(self) -> bool {
        matches!(self, Verdict::BackendFiltered | Verdict::BackendErrors)
    }
}

/// Classifies one moment. Distress wins over demand: refusals while workers fail are a
/// symptom of the failure, not of demand.
pub(crate) fn classify(config: &DetectorConfig, filtered_share: f64, totals: &Counts) -> Verdict {
    let min = config.min_samples;
    if filtered_share >= config.enter_filtered_share {
        return Verdict::BackendFiltered;
    }
    if totals
        .error_rate(min)
        .is_some_and(|rate| rate >= config.enter_error_rate)
    {
        return Verdict::BackendErrors;
    }
    if totals
        .refusal_rate(min)
        .is_some_and(|rate| rate >= config.enter_refusal_rate)
    {
        return Verdict::DemandOverload;
    }
    Verdict::Healthy
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(queued: u64, refused: u64, finished: u64, failed: u64) -> Counts {
        Counts {
            queued,
            capacity_refusals: refused,
            finished,
            failed,
        }
    }

    #[test]
    fn every_branch_is_reachable_and_distress_wins_over_demand() {
        let config = DetectorConfig::default();
        let quiet = counts(100, 0, 100, 0);
        assert_eq!(classify(&config, 0.0, &quiet), Verdict::Healthy);
        let refusing = counts(100, 60, 40, 0);
        assert_eq!(classify(&config, 0.0, &refusing), Verdict::DemandOverload);
        assert_eq!(classify(&config, 0.5, &refusing), Verdict::BackendFiltered);
        let failing = counts(100, 60, 40, 10);
        assert_eq!(classify(&config, 0.0, &failing), Verdict::BackendErrors);
        assert_eq!(classify(&config, 0.9, &failing), Verdict::BackendFiltered);
        let few = counts(10, 10, 10, 10);
        assert_eq!(
            classify(&config, 0.0, &few),
            Verdict::Healthy,
            "too few samples to rate"
        );
        assert!(Verdict::BackendErrors.is_distress() && !Verdict::DemandOverload.is_distress());
    }
}
