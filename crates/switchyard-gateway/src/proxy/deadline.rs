//! The first-byte deadline of one attempt, derived from what the worker has shown.
//!
//! A worker whose engine hangs while its HTTP server stays up accepts the request and never
//! sends a byte; without a deadline of its own the attempt waits for the whole request
//! timeout. The expected wait for the first token is the larger of the worker's recent TTFT
//! p90 and this prompt's tokens at the worker's observed prefill pace (a long prompt
//! legitimately takes longer); `factor` × that, at most `cap_ms`, is a stream's deadline. A
//! non-streaming answer's first byte is its last, so it also gets `factor` × `max_tokens` ×
//! TPOT p90 (only the request timeout bounds that part). Nothing is ever shorter than
//! `floor_ms`. A worker without figures yet is assumed to be as slow as the `cold_*` settings.

use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchyard_workers::{LatencyFigures, WorkerHandle};

use crate::openai::ParsedRequest;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FirstByteConfig {
    /// Shortest deadline, whatever the worker's figures say.
    pub floor_ms: u64,
    /// Longest wait for the first token, however long the prompt. Capped by
    /// `upstream.request_timeout_ms`.
    pub cap_ms: u64,
    /// Multiplier on the expected wait (≥ 1).
    pub factor: f64,
    /// TTFT p90 assumed for a worker that has not shown one yet.
    pub cold_ttft_ms: u64,
    /// TPOT p90 assumed for a worker that has not shown one yet.
    pub cold_tpot_ms: u64,
    /// Prompt tokens per second assumed for a worker that has not yet finished a long prompt.
    pub cold_prefill_tokens_per_second: u64,
}

impl Default for FirstByteConfig {
    /// The cold figures describe a busy engine serving a mid-size model — TTFT p90 2 s, 50 ms
    /// per output token, 2,000 prompt tokens/s — so a short stream to a worker without figures
    /// waits 6 s, not the 30 s cap, while a real engine's first requests are not cut short.
    fn default() -> Self {
        Self {
            floor_ms: 1_000,
            cap_ms: 30_000,
            factor: 3.0,
            cold_ttft_ms: 2_000,
            cold_tpot_ms: 50,
            cold_prefill_tokens_per_second: 2_000,
        }
    }
}

/// What a worker has shown of its pace, read once per attempt.
#[derive(Clone, Debug, Default)]
pub struct WorkerPace {
    pub latency: Option<std::sync::Arc<LatencyFigures>>,
    /// Seconds to first byte per prompt token on its long prompts.
    pub prefill_seconds_per_token: Option<f64>,
}

impl WorkerPace {
    pub fn of(worker: &WorkerHandle) -> Self {
        Self {
            latency: worker.latency(),
            prefill_seconds_per_token: worker.prefill_seconds_per_token(),
        }
    }
}

/// Seconds a sane figure may reach; keeps a corrupt scrape from overflowing `Duration`.
const MAX_FIGURE_SECONDS: f64 = 3_600.0;

fn figure(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0)
}

fn seconds(value: f64) -> Duration {
    Duration::from_secs_f64(value.clamp(0.0, MAX_FIGURE_SECONDS))
}

impl FirstByteConfig {
    /// Returns the path and problem of the first invalid field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let positive = [
            ("upstream.first_byte.floor_ms", self.floor_ms),
            ("upstream.first_byte.cold_ttft_ms", self.cold_ttft_ms),
            ("upstream.first_byte.cold_tpot_ms", self.cold_tpot_ms),
            (
                "upstream.first_byte.cold_prefill_tokens_per_second",
                self.cold_prefill_tokens_per_second,
            ),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, value)| *value == 0) {
            return Err((field, "must be greater than 0".into()));
        }
        if self.cap_ms < self.floor_ms {
            return Err((
                "upstream.first_byte.cap_ms",
                "must be at least upstream.first_byte.floor_ms".into(),
            ));
        }
        if !(self.factor.is_finite() && self.factor >= 1.0) {
            return Err(("upstream.first_byte.factor", "must be a number ≥ 1".into()));
        }
        Ok(())
    }

    /// The deadline for one attempt of `request` (about `prompt_tokens` long) on a worker
    /// that has shown `pace`; `None` for a non-streaming answer of unknown length, which
    /// only the request timeout can bound.
    pub fn deadline(
        &self,
        pace: &WorkerPace,
        request: &ParsedRequest,
        prompt_tokens: u64,
    ) -> Option<Duration> {
        let latency = pace.latency.as_deref();
        let ttft = figure(latency.and_then(|l| l.ttft_p90_seconds))
            .unwrap_or(self.cold_ttft_ms as f64 / 1000.0);
        let prefill = prompt_tokens as f64 * self.seconds_per_prompt_token(pace);
        let first_token =
            seconds(self.factor * ttft.max(prefill)).min(Duration::from_millis(self.cap_ms));
        let whole = if request.stream {
            first_token
        } else {
            let tpot = figure(latency.and_then(|l| l.tpot_p90_seconds))
                .unwrap_or(self.cold_tpot_ms as f64 / 1000.0);
            first_token + seconds(self.factor * request.max_tokens? as f64 * tpot)
        };
        Some(whole.max(Duration::from_millis(self.floor_ms)))
    }

    /// When this request's bytes are due from a worker that has shown `pace`, for hung
    /// detection (no factor: a worker late on every request is the signal). A stream's at
    /// its expected first token — only its prompt's prefill without figures; a
    /// non-streaming answer's after its expected generation, and never without figures
    /// (its silence proves nothing).
    pub fn bytes_due(
        &self,
        pace: &WorkerPace,
        request: &ParsedRequest,
        prompt_tokens: u64,
    ) -> Option<Duration> {
        let latency = pace.latency.as_deref();
        let prefill = prompt_tokens as f64 * self.seconds_per_prompt_token(pace);
        let ttft = figure(latency.and_then(|l| l.ttft_p90_seconds));
        let first_token = ttft.unwrap_or(0.0).max(prefill);
        if request.stream {
            return Some(seconds(first_token));
        }
        let tpot = figure(latency.and_then(|l| l.tpot_p90_seconds))?;
        ttft?;
        Some(seconds(first_token + request.max_tokens? as f64 * tpot))
    }

    fn seconds_per_prompt_token(&self, pace: &WorkerPace) -> f64 {
        figure(pace.prefill_seconds_per_token)
            .unwrap_or(1.0 / self.cold_prefill_tokens_per_second as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use switchyard_workers::LatencySource;

    fn pace(ttft: Option<f64>, tpot: Option<f64>) -> WorkerPace {
        WorkerPace {
            latency: Some(Arc::new(LatencyFigures {
                source: LatencySource::Metrics,
                ttft_p90_seconds: ttft,
                tpot_p90_seconds: tpot,
                ttft_samples: 50,
                tpot_samples: 500,
                window_seconds: 5.0,
            })),
            prefill_seconds_per_token: None,
        }
    }

    fn request(stream: bool, max_tokens: Option<u64>) -> ParsedRequest {
        ParsedRequest {
            model: "m".into(),
            stream,
            prompt: "hello".into(),
            user: None,
            max_tokens,
            include_usage: false,
        }
    }

    fn ms(value: u64) -> Option<Duration> {
        Some(Duration::from_millis(value))
    }

    #[test]
    fn streams_wait_for_ttft_and_non_streaming_answers_for_the_whole_generation() {
        let config = FirstByteConfig::default();
        let shown = pace(Some(0.5), Some(0.02));
        assert_eq!(
            config.deadline(&shown, &request(true, Some(100)), 2),
            ms(1500)
        );
        // 0.5 × 3 + 100 × 0.02 × 3 = 7.5 s
        assert_eq!(
            config.deadline(&shown, &request(false, Some(100)), 2),
            ms(7500)
        );
    }

    #[test]
    fn a_long_prompt_gets_the_time_its_prefill_takes_up_to_the_cap() {
        let config = FirstByteConfig::default();
        let mut shown = pace(Some(0.2), Some(0.02));
        // Not yet seen a long prompt: the cold pace, 2,000 tokens/s → 8,000 tokens 4 s × 3.
        assert_eq!(
            config.deadline(&shown, &request(true, None), 8_000),
            ms(12_000)
        );
        // Shown 0.1 ms a token: 8,000 tokens 0.8 s × 3 = 2.4 s; a short prompt keeps TTFT's.
        shown.prefill_seconds_per_token = Some(0.0001);
        assert_eq!(
            config.deadline(&shown, &request(true, None), 8_000),
            ms(2_400)
        );
        assert_eq!(config.deadline(&shown, &request(true, None), 10), ms(1_000));
        // Bounded: a million-token prompt waits the cap, plus its generation if not streamed.
        assert_eq!(
            config.deadline(&shown, &request(true, None), 1_000_000),
            ms(30_000)
        );
        assert_eq!(
            config.deadline(&shown, &request(false, Some(100)), 1_000_000),
            ms(36_000)
        );
        assert_eq!(
            config.bytes_due(&shown, &request(true, None), 8_000),
            ms(800)
        );
    }

    #[test]
    fn a_worker_without_figures_gets_the_cold_deadline_not_the_cap() {
        let config = FirstByteConfig::default();
        let cold = WorkerPace::default();
        assert_eq!(config.deadline(&cold, &request(true, None), 10), ms(6_000));
        // 2 s × 3 + 32 × 50 ms × 3
        assert_eq!(
            config.deadline(&cold, &request(false, Some(32)), 10),
            ms(10_800)
        );
        let unknown_ttft = pace(None, Some(0.1));
        assert_eq!(
            config.deadline(&unknown_ttft, &request(true, None), 10),
            ms(6_000)
        );
        let corrupt = pace(Some(f64::INFINITY), None);
        assert_eq!(
            config.deadline(&corrupt, &request(true, None), 10),
            ms(6_000)
        );
    }

    #[test]
    fn the_floor_and_the_cap_bound_it_and_an_unbounded_answer_has_none() {
        let config = FirstByteConfig::default();
        let fast = pace(Some(0.01), Some(0.001));
        assert_eq!(config.deadline(&fast, &request(true, None), 10), ms(1_000));
        let slow = pace(Some(20.0), Some(0.1));
        assert_eq!(config.deadline(&slow, &request(true, None), 10), ms(30_000));
        // A non-streaming answer of unknown length cannot be bounded by the figures.
        assert_eq!(config.deadline(&fast, &request(false, None), 10), None);
    }

    #[test]
    fn bytes_are_due_at_the_expected_first_byte_and_never_for_an_unbounded_answer() {
        let config = FirstByteConfig::default();
        let shown = pace(Some(0.5), Some(0.02));
        assert_eq!(
            config.bytes_due(&shown, &request(false, Some(100)), 10),
            ms(2500)
        );
        let cold = WorkerPace::default();
        assert_eq!(config.bytes_due(&cold, &request(true, None), 0), ms(0));
        assert_eq!(
            config.bytes_due(&cold, &request(false, Some(100)), 10),
            None
        );
        assert_eq!(config.bytes_due(&shown, &request(false, None), 10), None);
    }

    #[test]
    fn validation_names_the_field() {
        let cases = [
            (
                FirstByteConfig {
                    cap_ms: 10,
                    ..FirstByteConfig::default()
                },
                "upstream.first_byte.cap_ms",
            ),
            (
                FirstByteConfig {
                    factor: 0.5,
                    ..FirstByteConfig::default()
                },
                "upstream.first_byte.factor",
            ),
            (
                FirstByteConfig {
                    floor_ms: 0,
                    ..FirstByteConfig::default()
                },
                "upstream.first_byte.floor_ms",
            ),
            (
                FirstByteConfig {
                    cold_ttft_ms: 0,
                    ..FirstByteConfig::default()
                },
                "upstream.first_byte.cold_ttft_ms",
            ),
            (
                FirstByteConfig {
                    cold_prefill_tokens_per_second: 0,
                    ..FirstByteConfig::default()
                },
                "upstream.first_byte.cold_prefill_tokens_per_second",
            ),
        ];
        for (config, field) in cases {
            assert_eq!(config.validate().unwrap_err().0, field);
        }
        FirstByteConfig::default().validate().unwrap();
    }
}
