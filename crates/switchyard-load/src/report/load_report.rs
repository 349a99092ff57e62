//! The frozen result of a run and the questions figures ask of it.

use std::collections::BTreeMap;

use serde::Serialize;

use super::breakdown::{BreakdownReport, TargetLoad};
use super::summary::{LatencySummary, WorkerLoad};
use crate::config::Workload;
use crate::stats::coefficient_of_variation;
use crate::timeline::TimelineSecond;

// `render_table` is implemented in `render.rs`, next to the table renderer that reads this
// report, so the report does not depend on its own rendering.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// The first `--target` (the only one unless several were given).
    pub target: String,
    /// Attempts and successes per target URL.
    pub targets: BTreeMap<String, TargetLoad>,
    pub model: String,
    pub workload: Workload,
    pub seed: u64,
    pub configured_rate: f64,
    /// Wall-clock time (ms since the Unix epoch) of the run's start: second 0 of the
    /// timeline, for lining it up with outside events (a worker killed, capacity added).
    pub started_unix_ms: u64,
    /// Seconds spent issuing arrivals (the denominator of `achieved_rate`).
    pub issue_secs: f64,
    /// Requests issued, i.e. first attempts (client retries are counted in `total_attempts`).
    pub requests_sent: u64,
    /// Requests that eventually succeeded (after client retries, if any).
    pub ok: u64,
    /// Requests that finally failed, by HTTP status ("429", "503") or kind ("connect",
    /// "timeout": no answer within the client timeout, "stream_error", "stream_incomplete":
    /// a stream that ended without `[DONE]`); a request aborted at the end of the run counts
    /// as "timeout".
    pub errors: BTreeMap<String, u64>,
    /// Arrivals not sent because `max_in_flight` requests were already outstanding.
    pub client_dropped: u64,
    pub achieved_rate: f64,
    /// First attempts plus client retries.
    pub total_attempts: u64,
    pub client_retries: u64,
    /// `total_attempts / requests_sent` (1 without client retries).
    pub client_retry_amplification: f64,
    /// `ok / requests_sent`.
    pub eventual_success_rate: f64,
    /// Every failed attempt (including the ones a retry later fixed) by status or kind.
    pub attempt_errors: BTreeMap<String, u64>,
    /// `Retry-After` values (seconds) that came with failed attempts.
    pub retry_after: LatencySummary,
    pub ttft: LatencySummary,
    pub e2e: LatencySummary,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    /// Σ cached_tokens / Σ prompt_tokens from the usage of successful requests.
    pub physical_hit_rate: f64,
    /// Successful requests per `x-switchyard-worker` value ("unknown" without the header).
    pub workers: BTreeMap<String, WorkerLoad>,
    /// Population stddev / mean of the per-worker request counts (0 for a single worker).
    pub worker_load_cv: f64,
    /// Per priority class ("P0", "P1", "P2"); empty without `--priority-mix`.
    pub priority_classes: BTreeMap<String, BreakdownReport>,
    /// Per client retry group ("honor", "fixed1s", …); empty without `--client-retry`.
    pub client_groups: BTreeMap<String, BreakdownReport>,
    /// Per-second series by send time; present with `--timeline`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<Vec<TimelineSecond>>,
}

impl LoadReport {
    pub fn hit_rate(&self) -> f64 {
        if self.prompt_tokens == 0 {
            return 0.0;
        }
        self.cached_tokens as f64 / self.prompt_tokens as f64
    }

    pub fn load_cv(&self) -> f64 {
        let counts: Vec<u64> = self.workers.values().map(|load| load.requests).collect();
        coefficient_of_variation(&counts)
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// First second at or after `from` whose attempts succeeded at `rate` or better, and every
    /// later second with attempts did too; `None` without a timeline or if that never held.
    pub fn settled_above(&self, rate: f64, from: u64) -> Option<u64> {
        let timeline = self.timeline.as_ref()?;
        let mut settled = None;
        for second in timeline.iter().filter(|second| second.second >= from) {
            match second.success_rate {
                Some(achieved) if achieved < rate => settled = None,
                Some(_) => settled = settled.or(Some(second.second)),
                None => {}
            }
        }
        settled
    }

    /// Last second in which an attempt sent then was served by `worker`.
    pub fn last_second_served_by(&self, worker: &str) -> Option<u64> {
        self.timeline
            .as_ref()?
            .iter()
            .rev()
            .find(|second| second.workers.get(worker).is_some_and(|&count| count > 0))
            .map(|second| second.second)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Collector, RunFacts};

    fn second(second: u64, success_rate: Option<f64>, workers: &[(&str, u64)]) -> TimelineSecond {
        TimelineSecond {
            second,
            success_rate,
            workers: workers
                .iter()
                .map(|(name, count)| ((*name).to_owned(), *count))
                .collect(),
            ..TimelineSecond::default()
        }
    }

    fn report_with(timeline: Vec<TimelineSecond>) -> LoadReport {
        let mut report = Collector::default().finish(RunFacts::for_tests());
        report.timeline = Some(timeline);
        report
    }

    #[test]
    fn settled_above_needs_every_later_second_to_hold() {
        let report = report_with(vec![
            second(0, Some(1.0), &[]),
            second(1, Some(0.2), &[]),
            second(2, Some(0.995), &[]),
            second(3, Some(0.9), &[]),
            second(4, Some(1.0), &[]),
            second(5, None, &[]),
            second(6, Some(0.999), &[]),
        ]);
        assert_eq!(report.settled_above(0.99, 1), Some(4));
        assert_eq!(report.settled_above(0.99, 0), Some(4));
        assert_eq!(report.settled_above(0.5, 0), Some(2));
        assert_eq!(report.settled_above(1.0, 6), None);
        assert_eq!(
            Collector::default()
                .finish(RunFacts::for_tests())
                .settled_above(0.5, 0),
            None
        );
    }

    #[test]
    fn last_second_served_by_a_worker() {
        let report = report_with(vec![
            second(0, Some(1.0), &[("a", 3), ("b", 2)]),
            second(1, Some(1.0), &[("a", 1), ("b", 0)]),
            second(2, Some(1.0), &[("b", 4)]),
        ]);
        assert_eq!(report.last_second_served_by("a"), Some(1));
        assert_eq!(report.last_second_served_by("b"), Some(2));
        assert_eq!(report.last_second_served_by("c"), None);
    }
}
