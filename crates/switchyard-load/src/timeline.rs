//! Per-second series of a run (`--timeline`), so figures can read "time until no request
//! goes to worker X" or "time until the success rate is back above 99 %".
//!
//! Every attempt (first try or client retry) lands in the second it was SENT, whenever its
//! answer arrives: a second's success rate is then the fate of what was sent in it.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use crate::client_retry::is_retryable;
use crate::exchange::{Outcome, UNKNOWN_WORKER};
use crate::stats::percentile_nearest_rank;

/// One second of the run, counted by send time.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TimelineSecond {
    /// Seconds since the run started (this bucket covers `[second, second + 1)`).
    pub second: u64,
    /// Attempts sent: first attempts plus client retries.
    pub sent: u64,
    pub first_attempts: u64,
    pub retries: u64,
    pub ok: u64,
    /// Failed attempts by HTTP status or kind ("connect", "timeout", …).
    pub errors: BTreeMap<String, u64>,
    /// Attempts the target did not refuse: answered with anything but 429/503.
    pub admitted: u64,
    /// Attempts still open when the run ended (aborted at the drain deadline).
    pub unfinished: u64,
    /// `ok / sent`; `None` for a second without attempts.
    pub success_rate: Option<f64>,
    /// Successful attempts by the worker that served them.
    pub workers: BTreeMap<String, u64>,
    /// TTFT percentiles (seconds) of this second's successful attempts.
    pub ttft_p50: Option<f64>,
    pub ttft_p99: Option<f64>,
    /// Usage of this second's successful attempts (their ratio is the second's hit rate).
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
}

#[derive(Debug, Default)]
struct SecondTally {
    first_attempts: u64,
    retries: u64,
    ok: u64,
    refused: u64,
    errors: BTreeMap<String, u64>,
    workers: BTreeMap<String, u64>,
    ttft_secs: Vec<f64>,
    prompt_tokens: u64,
    cached_tokens: u64,
}

/// Accumulates attempts into per-second buckets.
#[derive(Debug, Default)]
pub struct Timeline {
    seconds: BTreeMap<u64, SecondTally>,
}

impl Timeline {
    pub fn attempt_started(&mut self, sent_at: Duration, retry: bool) {
        let tally = self.bucket(sent_at);
        if retry {
            tally.retries += 1;
        } else {
            tally.first_attempts += 1;
        }
    }

    pub fn attempt_finished(&mut self, sent_at: Duration, outcome: &Outcome) {
        let tally = self.bucket(sent_at);
        match outcome {
            Ok(completion) => {
                tally.ok += 1;
                let worker = completion.worker.as_deref().unwrap_or(UNKNOWN_WORKER);
                *tally.workers.entry(worker.to_owned()).or_default() += 1;
                if let Some(ttft) = completion.ttft {
                    tally.ttft_secs.push(ttft.as_secs_f64());
                }
                tally.prompt_tokens += completion.prompt_tokens;
                tally.cached_tokens += completion.cached_tokens;
            }
            Err(failure) => {
                *tally.errors.entry(failure.kind.clone()).or_default() += 1;
                if failure.status.is_some_and(is_retryable) {
                    tally.refused += 1;
                }
            }
        }
    }

    /// The series from second 0 to the last second with an attempt, without gaps.
    pub fn finish(self) -> Vec<TimelineSecond> {
        let Some(&last) = self.seconds.keys().next_back() else {
            return Vec::new();
        };
        let mut seconds = self.seconds;
        (0..=last)
            .map(|second| summarize(second, seconds.remove(&second).unwrap_or_default()))
            .collect()
    }

    fn bucket(&mut self, sent_at: Duration) -> &mut SecondTally {
        self.seconds.entry(sent_at.as_secs()).or_default()
    }
}

fn summarize(second: u64, mut tally: SecondTally) -> TimelineSecond {
    let sent = tally.first_attempts + tally.retries;
    let failed: u64 = tally.errors.values().sum();
    let finished = tally.ok + failed;
    tally.ttft_secs.sort_by(f64::total_cmp);
    TimelineSecond {
        second,
        sent,
        first_attempts: tally.first_attempts,
        retries: tally.retries,
        ok: tally.ok,
        errors: tally.errors,
        admitted: finished - tally.refused,
        unfinished: sent.saturating_sub(finished),
        success_rate: (sent > 0).then(|| tally.ok as f64 / sent as f64),
        workers: tally.workers,
        ttft_p50: percentile_nearest_rank(&tally.ttft_secs, 50.0),
        ttft_p99: percentile_nearest_rank(&tally.ttft_secs, 99.0),
        prompt_tokens: tally.prompt_tokens,
        cached_tokens: tally.cached_tokens,
    }
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::*;
    use crate::exchange::{Completion, Failure};

    fn ok(worker: &str, ttft_ms: u64) -> Outcome {
        Ok(Completion {
            ttft: Some(Duration::from_millis(ttft_ms)),
            worker: Some(worker.to_owned()),
            prompt_tokens: 100,
            cached_tokens: ttft_ms,
            ..Completion::default()
        })
    }

    fn at(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn attempts_land_in_their_send_second_with_gaps_filled() {
        let mut timeline = Timeline::default();
        timeline.attempt_started(at(100), false);
        timeline.attempt_finished(at(100), &ok("w1", 10));
        timeline.attempt_started(at(900), false);
        timeline.attempt_finished(
            at(900),
            &Err(Failure::status(StatusCode::SERVICE_UNAVAILABLE, None)),
        );
        timeline.attempt_started(at(2_500), true);
        timeline.attempt_finished(at(2_500), &ok("w2", 30));
        timeline.attempt_started(at(2_600), false);
        timeline.attempt_finished(at(2_600), &Err(Failure::new("connect")));
        timeline.attempt_started(at(2_700), true);
        let series = timeline.finish();

        assert_eq!(series.len(), 3);
        let first = &series[0];
        assert_eq!((first.sent, first.ok, first.admitted), (2, 1, 1));
        assert_eq!(first.errors["503"], 1);
        assert_eq!(first.success_rate, Some(0.5));
        assert_eq!(first.workers["w1"], 1);
        assert_eq!(
            series[1],
            TimelineSecond {
                second: 1,
                ..TimelineSecond::default()
            }
        );
        let third = &series[2];
        assert_eq!((third.first_attempts, third.retries, third.sent), (1, 2, 3));
        // A connect error was not a refusal; the open retry is unfinished.
        assert_eq!((third.admitted, third.unfinished), (2, 1));
        assert_eq!(third.ttft_p99, Some(0.03));
        assert_eq!((third.prompt_tokens, third.cached_tokens), (100, 30));
        assert!((third.success_rate.unwrap() - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn empty_timeline_is_empty() {
        assert!(Timeline::default().finish().is_empty());
    }
}
