//! Accumulates a run as it happens: requests begin, their attempts start and finish, and each
//! request ends with one final outcome. Request tasks share one collector behind a mutex.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::breakdown::{Tally, TargetLoad, ratio};
use super::load_report::LoadReport;
use super::summary::{LatencySummary, WorkerLoad};
use crate::client_retry::ClientRetryMode;
use crate::config::Workload;
use crate::exchange::{Failure, Outcome, UNKNOWN_WORKER};
use crate::priority::PriorityClass;
use crate::timeline::Timeline;

/// Run-level facts the collector cannot see itself.
#[derive(Clone, Debug)]
pub struct RunFacts {
    /// Every `--target`, in the order the attempts' target indexes refer to.
    pub targets: Vec<String>,
    pub model: String,
    pub workload: Workload,
    pub seed: u64,
    pub configured_rate: f64,
    pub issue_time: Duration,
    /// Wall-clock start of the run (ms since the Unix epoch), the zero of the timeline.
    pub started_unix_ms: u64,
}

#[cfg(test)]
impl RunFacts {
    pub(crate) fn for_tests() -> Self {
        Self {
            targets: vec!["http://t".into()],
            model: "m".into(),
            workload: Workload::Uniform,
            seed: 1,
            configured_rate: 10.0,
            issue_time: Duration::from_secs(2),
            started_unix_ms: 1_700_000_000_000,
        }
    }
}

/// Which slices a request belongs to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestLabels {
    pub target: usize,
    pub priority: Option<PriorityClass>,
    pub client_group: Option<ClientRetryMode>,
}

/// Handle of a request between [`Collector::begin`] and [`Collector::finish_request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RequestId(u64);

impl RequestId {
    /// Requests are numbered from 0 in the order they began.
    pub fn index(self) -> u64 {
        self.0
    }
}

#[derive(Debug, Default)]
pub struct Collector {
    next_id: u64,
    open: HashMap<RequestId, RequestLabels>,
    requests: u64,
    attempts: u64,
    ok: u64,
    client_dropped: u64,
    errors: BTreeMap<String, u64>,
    attempt_errors: BTreeMap<String, u64>,
    retry_after_secs: Vec<f64>,
    ttft_secs: Vec<f64>,
    e2e_secs: Vec<f64>,
    prompt_tokens: u64,
    cached_tokens: u64,
    completion_tokens: u64,
    worker_requests: BTreeMap<String, u64>,
    targets: BTreeMap<usize, TargetLoad>,
    classes: BTreeMap<PriorityClass, Tally>,
    groups: BTreeMap<String, Tally>,
    timeline: Option<Timeline>,
}

impl Collector {
    /// `timeline`: also keep the per-second series.
    pub fn new(timeline: bool) -> Self {
        Self {
            timeline: timeline.then(Timeline::default),
            ..Self::default()
        }
    }

    pub fn record_dropped(&mut self) {
        self.client_dropped += 1;
    }

    /// A new request (not a retry) is about to make its first attempt.
    pub fn begin(&mut self, labels: RequestLabels) -> RequestId {
        let id = RequestId(self.next_id);
        self.next_id += 1;
        self.requests += 1;
        self.open.insert(id, labels);
        self.slices(labels, Tally::begin);
        id
    }

    /// An attempt of `id` was sent `sent_at` after the run started.
    pub fn attempt_started(&mut self, id: RequestId, sent_at: Duration, retry: bool) {
        self.attempts += 1;
        let Some(&labels) = self.open.get(&id) else {
            return;
        };
        self.targets.entry(labels.target).or_default().attempts += 1;
        self.slices(labels, Tally::attempt);
        if let Some(timeline) = &mut self.timeline {
            timeline.attempt_started(sent_at, retry);
        }
    }

    /// The attempt of `id` sent at `sent_at` ended with `outcome`.
    pub fn attempt_finished(&mut self, id: RequestId, sent_at: Duration, outcome: &Outcome) {
        match outcome {
            Ok(_) => {
                if let Some(labels) = self.open.get(&id) {
                    self.targets.entry(labels.target).or_default().ok += 1;
                }
            }
            Err(failure) => {
                *self.attempt_errors.entry(failure.kind.clone()).or_default() += 1;
                if let Some(retry_after) = failure.retry_after {
                    self.retry_after_secs.push(retry_after.as_secs_f64());
                }
            }
        }
        if let Some(timeline) = &mut self.timeline {
            timeline.attempt_finished(sent_at, outcome);
        }
    }

    /// `id` is over: `outcome` is its last attempt's (success, or the failure given up on).
    pub fn finish_request(&mut self, id: RequestId, outcome: &Outcome) {
        let Some(labels) = self.open.remove(&id) else {
            return;
        };
        self.slices(labels, |tally| tally.finish(outcome));
        match outcome {
            Err(failure) => *self.errors.entry(failure.kind.clone()).or_default() += 1,
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

    /// One request, one attempt at second 0: the common case, and a shorthand for tests.
    #[cfg(test)]
    pub(crate) fn record(&mut self, outcome: &Outcome) {
        let id = self.begin(RequestLabels::default());
        self.attempt_started(id, Duration::ZERO, false);
        self.attempt_finished(id, Duration::ZERO, outcome);
        self.finish_request(id, outcome);
    }

    fn slices(&mut self, labels: RequestLabels, apply: impl Fn(&mut Tally)) {
        if let Some(priority) = labels.priority {
            apply(self.classes.entry(priority).or_default());
        }
        if let Some(group) = labels.client_group {
            apply(self.groups.entry(group.label()).or_default());
        }
    }

    /// Requests issued so far (first attempts).
    pub fn sent(&self) -> u64 {
        self.requests
    }

    pub fn attempts(&self) -> u64 {
        self.attempts
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

    /// Freezes the run. Requests still open were aborted at the drain deadline: "timeout".
    pub fn finish(mut self, facts: RunFacts) -> LoadReport {
        let mut aborted: Vec<RequestId> = self.open.keys().copied().collect();
        aborted.sort_by_key(|id| id.0);
        for id in aborted {
            self.finish_request(id, &Err(Failure::new("timeout")));
        }
        let issue_secs = facts.issue_time.as_secs_f64();
        let achieved_rate = if issue_secs > 0.0 {
            self.requests as f64 / issue_secs
        } else {
            0.0
        };
        let served: u64 = self.worker_requests.values().sum();
        let workers = self
            .worker_requests
            .into_iter()
            .map(|(name, requests)| {
                let share = ratio(requests, served);
                (name, WorkerLoad { requests, share })
            })
            .collect();
        let targets = facts
            .targets
            .iter()
            .enumerate()
            .map(|(index, url)| {
                let load = self.targets.remove(&index).unwrap_or_default();
                (url.clone(), load)
            })
            .collect();
        let mut report = LoadReport {
            target: facts.targets.first().cloned().unwrap_or_default(),
            targets,
            model: facts.model,
            workload: facts.workload,
            seed: facts.seed,
            configured_rate: facts.configured_rate,
            started_unix_ms: facts.started_unix_ms,
            issue_secs,
            requests_sent: self.requests,
            ok: self.ok,
            errors: self.errors,
            client_dropped: self.client_dropped,
            achieved_rate,
            total_attempts: self.attempts,
            client_retries: self.attempts.saturating_sub(self.requests),
            client_retry_amplification: if self.requests == 0 {
                1.0
            } else {
                ratio(self.attempts, self.requests)
            },
            eventual_success_rate: ratio(self.ok, self.requests),
            attempt_errors: self.attempt_errors,
            retry_after: LatencySummary::from_sample(self.retry_after_secs),
            ttft: LatencySummary::from_sample(self.ttft_secs),
            e2e: LatencySummary::from_sample(self.e2e_secs),
            prompt_tokens: self.prompt_tokens,
            cached_tokens: self.cached_tokens,
            completion_tokens: self.completion_tokens,
            physical_hit_rate: 0.0,
            workers,
            worker_load_cv: 0.0,
            priority_classes: self
                .classes
                .into_iter()
                .map(|(class, tally)| (class.as_str().to_owned(), tally.report()))
                .collect(),
            client_groups: self
                .groups
                .into_iter()
                .map(|(group, tally)| (group, tally.report()))
                .collect(),
            timeline: self.timeline.map(Timeline::finish),
        };
        report.physical_hit_rate = report.hit_rate();
        report.worker_load_cv = report.load_cv();
        report
    }
}

#[cfg(test)]
#[path = "collector_tests.rs"]
mod tests;
