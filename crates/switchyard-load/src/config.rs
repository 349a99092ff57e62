use std::time::Duration;

use crate::LoadError;
use crate::client_retry::{ClientRetryMix, DEFAULT_MAX_CLIENT_RETRIES, MAX_CLIENT_RETRIES_LIMIT};
use crate::priority::PriorityMix;
use crate::transport::Endpoint;

/// The shape of the prompts sent during a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Workload {
    /// Long shared system prompts plus growing per-session conversations (Zipf-skewed sessions).
    Multiturn,
    /// A few hot prefixes carry ~80 % of requests; the rest are unique.
    Hotkey,
    /// Unique random prompts, nothing shared.
    Uniform,
    /// Many concurrent multi-turn conversations in groups sharing an ~800-word system prompt,
    /// whole history per turn, no session header and no `user`.
    Agentic,
    /// `agentic` with each conversation's id sent as `x-session-id`.
    AgenticKeyed,
}

/// Everything [`crate::run`] needs to drive one open-loop run.
#[derive(Clone, Debug)]
pub struct LoadConfig {
    /// Base URL, e.g. `http://127.0.0.1:8080` (plain http, loopback only).
    pub target: String,
    /// More targets (e.g. further gateway replicas in front of the same workers): each
    /// request goes to one of `target` and these, uniformly at random (seeded).
    pub extra_targets: Vec<String>,
    /// Mean requests per second (Poisson arrivals).
    pub rate: f64,
    pub duration: Duration,
    pub workload: Workload,
    pub seed: u64,
    /// `None` → `GET /v1/models` and use the first id.
    pub model: Option<String>,
    pub max_tokens: u32,
    /// Arrivals beyond this many in-flight requests are counted as `client_dropped`, never queued.
    pub max_in_flight: usize,
    pub request_timeout: Duration,
    /// Extra headers sent with every request, e.g. authorization or priority.
    pub headers: Vec<(String, String)>,
    /// Print a progress line to stderr every second.
    pub progress: bool,
    /// Stream with `stream_options.include_usage`; `false` sends plain JSON requests.
    pub stream: bool,
    /// Each request asks for a class drawn from this mix (`x-switchyard-priority`).
    pub priority_mix: Option<PriorityMix>,
    /// Each request belongs to a client group drawn from this mix; groups decide whether
    /// and when a 429/503 is retried. `None`: nobody retries.
    pub client_retry: Option<ClientRetryMix>,
    /// Retries per request at most (on top of the first attempt).
    pub max_client_retries: u32,
    /// Keep the per-second series in the report.
    pub timeline: bool,
    /// Write every sent request (messages, answer, worker) here as JSON lines.
    pub trace_out: Option<std::path::PathBuf>,
}

impl LoadConfig {
    pub const DEFAULT_RATE: f64 = 10.0;
    pub const DEFAULT_DURATION: Duration = Duration::from_secs(30);
    pub const DEFAULT_SEED: u64 = 42;
    pub const DEFAULT_MAX_TOKENS: u32 = 32;
    pub const DEFAULT_MAX_IN_FLIGHT: usize = 1024;
    pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
    /// Hard bounds on one run's length, whatever the command line says.
    pub const MAX_DURATION: Duration = Duration::from_secs(3600);
    pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
    pub const MAX_TARGETS: usize = 16;

    pub fn new(target: impl Into<String>) -> Self {
        Self {
            target: target.into(),
            extra_targets: Vec::new(),
            rate: Self::DEFAULT_RATE,
            duration: Self::DEFAULT_DURATION,
            workload: Workload::Multiturn,
            seed: Self::DEFAULT_SEED,
            model: None,
            max_tokens: Self::DEFAULT_MAX_TOKENS,
            max_in_flight: Self::DEFAULT_MAX_IN_FLIGHT,
            request_timeout: Self::DEFAULT_REQUEST_TIMEOUT,
            headers: Vec::new(),
            progress: false,
            stream: true,
            priority_mix: None,
            client_retry: None,
            max_client_retries: DEFAULT_MAX_CLIENT_RETRIES,
            timeline: false,
            trace_out: None,
        }
    }

    /// `target` followed by `extra_targets`: the order attempts' target indexes refer to.
    pub fn targets(&self) -> Vec<String> {
        std::iter::once(&self.target)
            .chain(&self.extra_targets)
            .cloned()
            .collect()
    }

    /// The hard cap on requests one run may issue, whatever the arrival process draws.
    pub fn max_requests(&self) -> u64 {
        let expected = self.rate * self.duration.as_secs_f64();
        // Saturating float→int cast: absurd rates cannot overflow the bound.
        (expected * 1.5 + 100.0) as u64
    }

    pub(crate) fn validate(&self) -> Result<(), LoadError> {
        if !self.rate.is_finite() || self.rate <= 0.0 {
            return Err(LoadError::InvalidConfig(format!(
                "rate must be a positive number, got {}",
                self.rate
            )));
        }
        if self.duration.is_zero() || self.duration > Self::MAX_DURATION {
            return Err(LoadError::InvalidConfig(format!(
                "duration must be positive and at most {:?}",
                Self::MAX_DURATION
            )));
        }
        if self.extra_targets.len() >= Self::MAX_TARGETS {
            return Err(LoadError::InvalidConfig(format!(
                "at most {} targets",
                Self::MAX_TARGETS
            )));
        }
        for target in self.targets() {
            Endpoint::new(&target, &self.headers)?;
        }
        if self.max_client_retries > MAX_CLIENT_RETRIES_LIMIT {
            return Err(LoadError::InvalidConfig(format!(
                "max_client_retries must be at most {MAX_CLIENT_RETRIES_LIMIT}"
            )));
        }
        if self.max_in_flight == 0 {
            return Err(LoadError::InvalidConfig(
                "max_in_flight must be at least 1".into(),
            ));
        }
        if self.request_timeout.is_zero() || self.request_timeout > Self::MAX_REQUEST_TIMEOUT {
            return Err(LoadError::InvalidConfig(format!(
                "request_timeout must be positive and at most {:?}",
                Self::MAX_REQUEST_TIMEOUT
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hard_request_bound_follows_rate_and_duration() {
        let mut config = LoadConfig::new("http://127.0.0.1:1");
        config.rate = 100.0;
        config.duration = Duration::from_secs(2);
        assert_eq!(config.max_requests(), 400);
    }

    #[test]
    fn validation_rejects_nonsense() {
        let mut config = LoadConfig::new("http://127.0.0.1:1");
        assert!(config.validate().is_ok());
        config.rate = 0.0;
        assert!(config.validate().is_err());
        config.rate = f64::NAN;
        assert!(config.validate().is_err());
        config.rate = 1.0;
        config.max_in_flight = 0;
        assert!(config.validate().is_err());
        config.max_in_flight = 1;
        config.duration = Duration::from_secs(3601);
        assert!(config.validate().is_err());
        config.duration = Duration::from_secs(1);
        config.request_timeout = Duration::from_secs(601);
        assert!(config.validate().is_err());
        config.request_timeout = Duration::from_secs(1);
        config.max_client_retries = 21;
        assert!(config.validate().is_err());
        config.max_client_retries = 20;
        config.extra_targets = vec!["http://127.0.0.1:2".into(); 16];
        assert!(config.validate().is_err());
        config.extra_targets.truncate(15);
        assert!(config.validate().is_ok());
        assert_eq!(config.targets().len(), 16);
        assert_eq!(config.targets()[0], "http://127.0.0.1:1");
    }
}
