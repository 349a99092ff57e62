//! The first-byte deadline of one attempt, derived from what the worker has shown.
//!
//! A worker whose engine hangs while its HTTP server stays up accepts the request and never
//! sends a byte; without a deadline of its own the attempt waits for the whole request
//! timeout. The deadline is `factor` × the expected wait for the first byte — the worker's
//! recent TTFT p90 for a stream; TTFT p90 + `max_tokens` × TPOT p90 for a non-streaming
//! answer, whose first byte is its last — clamped to `[floor_ms, cap_ms]`. A worker with no
//! figures yet, or a non-streaming request without `max_tokens`, gets the cap.

use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchyard_workers::LatencyFigures;

use crate::openai::ParsedRequest;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FirstByteConfig {
    /// Shortest deadline, whatever the worker's figures say.
    pub floor_ms: u64,
    /// Longest deadline; also what a worker without figures gets. Capped by
    /// `upstream.request_timeout_ms`.
    pub cap_ms: u64,
    /// Multiplier on the expected wait (≥ 1).
    pub factor: f64,
}

impl Default for FirstByteConfig {
    fn default() -> Self {
        Self {
            floor_ms: 1_000,
            cap_ms: 30_000,
            factor: 3.0,
        }
    }
}

impl FirstByteConfig {
    /// Returns the path and problem of the first invalid field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.floor_ms == 0 {
            return Err((
                "upstream.first_byte.floor_ms",
                "must be greater than 0".into(),
            ));
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

    /// The deadline for one attempt of `request` on a worker that has shown `latency`.
    pub fn deadline(&self, latency: Option<&LatencyFigures>, request: &ParsedRequest) -> Duration {
        let floor = Duration::from_millis(self.floor_ms);
        let cap = Duration::from_millis(self.cap_ms);
        match expected_first_byte(latency, request) {
            Some(expected) => expected.mul_f64(self.factor).clamp(floor, cap),
            None => cap,
        }
    }
}

/// When this request's bytes are due from a worker that has shown `latency`, for hung
/// detection: a stream's at its expected first token (at once without figures); a
/// non-streaming answer's after its expected generation, and never without figures (its
/// silence proves nothing).
pub fn bytes_due(latency: Option<&LatencyFigures>, request: &ParsedRequest) -> Option<Duration> {
    expected_first_byte(latency, request).or(request.stream.then_some(Duration::ZERO))
}

/// Seconds a sane figure may reach; keeps a corrupt scrape from overflowing `Duration`.
const MAX_FIGURE_SECONDS: f64 = 3_600.0;

fn figure(value: Option<f64>) -> Option<f64> {
    value.filter(|v| v.is_finite() && *v >= 0.0)
}

/// When the first byte should come, from the worker's recent p90s.
fn expected_first_byte(
    latency: Option<&LatencyFigures>,
    request: &ParsedRequest,
) -> Option<Duration> {
    let latency = latency?;
    let ttft = figure(latency.ttft_p90_seconds)?;
    let seconds = if request.stream {
        ttft
    } else {
        let tpot = figure(latency.tpot_p90_seconds)?;
        ttft + request.max_tokens? as f64 * tpot
    };
    Some(Duration::from_secs_f64(seconds.min(MAX_FIGURE_SECONDS)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_workers::LatencySource;

    fn figures(ttft: Option<f64>, tpot: Option<f64>) -> LatencyFigures {
        LatencyFigures {
            source: LatencySource::Metrics,
            ttft_p90_seconds: ttft,
            tpot_p90_seconds: tpot,
            ttft_samples: 50,
            tpot_samples: 500,
            window_seconds: 5.0,
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

    #[test]
    fn streams_wait_for_ttft_and_non_streaming_answers_for_the_whole_generation() {
        let config = FirstByteConfig::default();
        let latency = figures(Some(0.5), Some(0.02));
        let stream = config.deadline(Some(&latency), &request(true, Some(100)));
        assert_eq!(stream, Duration::from_millis(1500));
        // (0.5 + 100 × 0.02) × 3 = 7.5 s
        let whole = config.deadline(Some(&latency), &request(false, Some(100)));
        assert_eq!(whole, Duration::from_millis(7500));
    }

    #[test]
    fn the_floor_and_the_cap_bound_it_and_unknowns_get_the_cap() {
        let config = FirstByteConfig::default();
        let fast = figures(Some(0.01), Some(0.001));
        assert_eq!(
            config.deadline(Some(&fast), &request(true, None)),
            Duration::from_secs(1)
        );
        let slow = figures(Some(20.0), Some(0.1));
        assert_eq!(
            config.deadline(Some(&slow), &request(true, None)),
            Duration::from_secs(30)
        );
        let cap = Duration::from_secs(30);
        assert_eq!(config.deadline(None, &request(true, None)), cap);
        assert_eq!(
            config.deadline(Some(&figures(None, Some(0.1))), &request(true, None)),
            cap
        );
        // A non-streaming answer of unknown length cannot be bounded by the figures.
        assert_eq!(config.deadline(Some(&fast), &request(false, None)), cap);
        let corrupt = figures(Some(f64::INFINITY), None);
        assert_eq!(config.deadline(Some(&corrupt), &request(true, None)), cap);
    }

    #[test]
    fn bytes_are_due_at_the_expected_first_byte_and_never_for_an_unbounded_answer() {
        let latency = figures(Some(0.5), Some(0.02));
        assert_eq!(
            bytes_due(Some(&latency), &request(false, Some(100))),
            Some(Duration::from_millis(2500))
        );
        assert_eq!(bytes_due(None, &request(true, None)), Some(Duration::ZERO));
        assert_eq!(bytes_due(None, &request(false, Some(100))), None);
    }

    #[test]
    fn validation_names_the_field() {
        let bad = FirstByteConfig {
            cap_ms: 10,
            ..FirstByteConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "upstream.first_byte.cap_ms");
        let bad = FirstByteConfig {
            factor: 0.5,
            ..FirstByteConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "upstream.first_byte.factor");
        let bad = FirstByteConfig {
            floor_ms: 0,
            ..FirstByteConfig::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().0,
            "upstream.first_byte.floor_ms"
        );
        FirstByteConfig::default().validate().unwrap();
    }
}
