//! Figures for a slice of the requests: one priority class, one client group, one target.

use std::collections::BTreeMap;

use serde::Serialize;

use super::summary::LatencySummary;
use crate::exchange::Outcome;

/// Outcomes of the requests in one slice (a priority class or a client retry group).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BreakdownReport {
    /// Requests (first attempts) in the slice.
    pub requests: u64,
    /// Attempts including client retries.
    pub attempts: u64,
    /// Requests that eventually succeeded.
    pub ok: u64,
    /// `ok / requests`; 0 without requests.
    pub success_rate: f64,
    /// Final failures by HTTP status or kind.
    pub errors: BTreeMap<String, u64>,
    /// TTFT of the successful attempts.
    pub ttft: LatencySummary,
}

/// Attempts and successes that went to one `--target`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TargetLoad {
    pub attempts: u64,
    pub ok: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Tally {
    requests: u64,
    attempts: u64,
    ok: u64,
    errors: BTreeMap<String, u64>,
    ttft_secs: Vec<f64>,
}

impl Tally {
    pub(crate) fn begin(&mut self) {
        self.requests += 1;
    }

    pub(crate) fn attempt(&mut self) {
        self.attempts += 1;
    }

    pub(crate) fn finish(&mut self, outcome: &Outcome) {
        match outcome {
            Ok(completion) => {
                self.ok += 1;
                if let Some(ttft) = completion.ttft {
                    self.ttft_secs.push(ttft.as_secs_f64());
                }
            }
            Err(failure) => *self.errors.entry(failure.kind.clone()).or_default() += 1,
        }
    }

    pub(crate) fn report(self) -> BreakdownReport {
        BreakdownReport {
            requests: self.requests,
            attempts: self.attempts,
            ok: self.ok,
            success_rate: ratio(self.ok, self.requests),
            errors: self.errors,
            ttft: LatencySummary::from_sample(self.ttft_secs),
        }
    }
}

/// `part / whole`, 0 for an empty whole (reports never carry NaN).
pub(crate) fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::exchange::{Completion, Failure};

    #[test]
    fn tally_counts_requests_attempts_and_final_outcomes() {
        let mut tally = Tally::default();
        for _ in 0..3 {
            tally.begin();
        }
        for _ in 0..5 {
            tally.attempt();
        }
        let ok = Ok(Completion {
            ttft: Some(Duration::from_millis(40)),
            ..Completion::default()
        });
        tally.finish(&ok);
        tally.finish(&ok);
        tally.finish(&Err(Failure::new("timeout")));
        let report = tally.report();
        assert_eq!((report.requests, report.attempts, report.ok), (3, 5, 2));
        assert!((report.success_rate - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(report.errors["timeout"], 1);
        assert_eq!(report.ttft.p99, Some(0.04));
        assert_eq!(Tally::default().report().success_rate, 0.0);
    }
}
