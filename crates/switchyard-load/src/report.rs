//! The run's results: accumulated per request by [`Collector`], frozen into a [`LoadReport`].

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::Workload;
use crate::exchange::Outcome;
use crate::stats::{coefficient_of_variation, percentile_nearest_rank};

/// Worker name used when a successful response carried no `x-switchyard-worker` header.
pub const UNKNOWN_WORKER: &str = "unknown";

/// Latency percentiles in seconds (nearest rank over the full sample); `None` without samples.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub samples: usize,
    pub p50: Option<f64>,
    pub p90: Option<f64>,
    pub p99: Option<f64>,
}

impl LatencySummary {
    fn from_sample(mut sample: Vec<f64>) -> Self {
        sample.sort_by(f64::total_cmp);
        Self {
            samples: sample.len(),
            p50: percentile_nearest_rank(&sample, 50.0),
            p90: percentile_nearest_rank(&sample, 90.0),
            p99: percentile_nearest_rank(&sample, 99.0),
        }
    }
}

/// Successful requests served by one worker.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerLoad {
    pub requests: u64,
    /// Fraction of all successful requests, 0..=1.
    pub share: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    pub target: String,
    pub model: String,
    pub workload: Workload,
    pub seed: u64,
    pub configured_rate: f64,
    /// Seconds spent issuing arrivals (the denominator of `achieved_rate`).
    pub issue_secs: f64,
    pub requests_sent: u64,
    pub ok: u64,
    /// Failed requests by HTTP status ("429", "503") or kind ("connect", "timeout", "stream_error").
    pub errors: BTreeMap<String, u64>,
    /// Arrivals not sent because `max_in_flight` requests were already outstanding.
    pub client_dropped: u64,
    pub achieved_rate: f64,
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

    pub fn render_table(&self) -> String {
        crate::render::render_side_by_side(&[("value", self)])
    }
}

/// Run-level facts the collector cannot see itself.
#[derive(Clone, Debug)]
pub struct RunFacts {
    pub target: String,
    pub model: String,
    pub workload: Workload,
    pub seed: u64,
    pub configured_rate: f64,
    pub issue_time: Duration,
}

#[derive(Debug, Default)]
pub struct Collector {
    sent: u64,
    ok: u64,
    client_dropped: u64,
    errors: BTreeMap<String, u64>,
    ttft_secs: Vec<f64>,
    e2e_secs: Vec<f64>,
    prompt_tokens: u64,
    cached_tokens: u64,
    completion_tokens: u64,
    worker_requests: BTreeMap<String, u64>,
}

impl Collector {
    pub fn record_sent(&mut self) {
        self.sent += 1;
    }

    pub fn record_dropped(&mut self) {
        self.client_dropped += 1;
    }

    pub fn record_failure(&mut self, kind: &str) {
        *self.errors.entry(kind.to_owned()).or_default() += 1;
    }

    pub fn record(&mut self, outcome: &Outcome) {
        match outcome {
            Err(failure) => self.record_failure(&failure.kind),
            Ok(completion) => {
                self.ok += 1;
                if let Some(ttft) = completion.ttft {
                    self.ttft_secs.push(ttft.as_secs_f64());
                }
                self.e2e_secs.push(completion.e2e.as_secs_f64());
                self.prompt_tokens += completion.prompt_tokens;
                self.cached_tokens += completion.cached_tokens;
                self.completion_tokens += completion.completion_tokens;
                let worker = completion.worker.as_deref().unwrap_or(UNKNOWN_WORKER);
                *self.worker_requests.entry(worker.to_owned()).or_default() += 1;
            }
        }
    }

    pub fn sent(&self) -> u64 {
        self.sent
    }

    pub fn ok(&self) -> u64 {
        self.ok
    }

    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    pub fn client_dropped(&self) -> u64 {
        self.client_dropped
    }

    pub fn finish(self, facts: RunFacts) -> LoadReport {
        let issue_secs = facts.issue_time.as_secs_f64();
        let achieved_rate = if issue_secs > 0.0 {
            self.sent as f64 / issue_secs
        } else {
            0.0
        };
        let served: u64 = self.worker_requests.values().sum();
        let workers = self
            .worker_requests
            .into_iter()
            .map(|(name, requests)| {
                let share = if served == 0 {
                    0.0
                } else {
                    requests as f64 / served as f64
                };
                (name, WorkerLoad { requests, share })
            })
            .collect();
        let mut report = LoadReport {
            target: facts.target,
            model: facts.model,
            workload: facts.workload,
            seed: facts.seed,
            configured_rate: facts.configured_rate,
            issue_secs,
            requests_sent: self.sent,
            ok: self.ok,
            errors: self.errors,
            client_dropped: self.client_dropped,
            achieved_rate,
            ttft: LatencySummary::from_sample(self.ttft_secs),
            e2e: LatencySummary::from_sample(self.e2e_secs),
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            completion_tokens: self.completion_tokens,
            physical_hit_rate: 0.0,
            workers,
            worker_load_cv: 0.0,
        };
        report.physical_hit_rate = report.hit_rate();
        report.worker_load_cv = report.load_cv();
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exchange::{Completion, Failure};

    fn completion(worker: Option<&str>, prompt: u64, cached: u64, millis: u64) -> Outcome {
        Ok(Completion {
            ttft: Some(Duration::from_millis(millis)),
            e2e: Duration::from_millis(millis * 2),
            prompt_tokens: prompt,
            cached_tokens: cached,
            worker: worker.map(str::to_owned),
            ..Completion::default()
        })
    }

    fn facts() -> RunFacts {
        RunFacts {
            target: "http://t".into(),
            model: "m".into(),
            workload: Workload::Uniform,
            seed: 1,
            configured_rate: 10.0,
            issue_time: Duration::from_secs(2),
        }
    }

    #[test]
    fn collector_turns_outcomes_into_a_report() {
        let mut collector = Collector::default();
        for _ in 0..6 {
            collector.record_sent();
        }
        collector.record_dropped();
        collector.record(&completion(Some("a"), 100, 50, 10));
        collector.record(&completion(Some("a"), 100, 0, 20));
        collector.record(&completion(Some("b"), 200, 150, 30));
        collector.record(&completion(None, 0, 0, 40));
        collector.record(&Err(Failure::new("503")));
        collector.record(&Err(Failure::new("timeout")));
        let report = collector.finish(facts());

        assert_eq!(report.requests_sent, 6);
        assert_eq!(report.ok, 4);
        assert_eq!(report.error_count(), 2);
        assert_eq!(report.errors["503"], 1);
        assert_eq!(report.client_dropped, 1);
        assert!((report.achieved_rate - 3.0).abs() < 1e-12);
        // (50 + 0 + 150) / (100 + 100 + 200)
        assert!((report.hit_rate() - 0.5).abs() < 1e-12);
        assert_eq!(report.physical_hit_rate, report.hit_rate());
        assert_eq!(report.workers["a"].requests, 2);
        assert!((report.workers["b"].share - 0.25).abs() < 1e-12);
        assert_eq!(report.workers[UNKNOWN_WORKER].requests, 1);
        // counts 2, 1, 1: mean 4/3, population stddev sqrt(2)/3 → cv sqrt(2)/4
        assert!((report.load_cv() - 2.0_f64.sqrt() / 4.0).abs() < 1e-12);
        assert_eq!(report.ttft.p50, Some(0.02));
        assert_eq!(report.ttft.p99, Some(0.04));
        assert_eq!(report.e2e.p90, Some(0.08));
    }

    #[test]
    fn empty_run_reports_zeros_not_nan() {
        let report = Collector::default().finish(facts());
        assert_eq!(report.hit_rate(), 0.0);
        assert_eq!(report.load_cv(), 0.0);
        assert_eq!(report.ttft.p50, None);
        assert!(serde_json::to_string(&report).is_ok());
    }
}
