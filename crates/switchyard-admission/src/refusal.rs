//! What a refused request is told: which gate, why, and when to come back.

use http::StatusCode;
use std::time::Duration;

/// The gate that refused; one metric label value each.
pub mod gate {
    pub const IDENTITY: &str = "identity";
    /// Client retries held back while the gateway recovers.
    pub const RECOVERY: &str = "recovery";
    pub const BUDGET: &str = "budget";
    pub const RATE: &str = "rate";
    pub const CONCURRENCY: &str = "concurrency";
    /// The priority queues: P2 paused, queue full, queue timeout.
    pub const QUEUE: &str = "queue";
    pub const ALL: [&str; 6] = [IDENTITY, RECOVERY, BUDGET, RATE, CONCURRENCY, QUEUE];
}

/// Machine-readable reason within a gate.
pub mod code {
    pub const UNAUTHORIZED: &str = "unauthorized";
    pub const FORBIDDEN_PURPOSE: &str = "forbidden_purpose";
    pub const BAD_HEADER: &str = "bad_header";
    pub const RETRY_DEFERRED: &str = "retry_deferred";
    pub const BUDGET_SOFT_LIMIT: &str = "budget_soft_limit";
    pub const BUDGET_HARD_LIMIT: &str = "budget_hard_limit";
    pub const BUDGET_EXHAUSTED: &str = "budget_exhausted";
    pub const LEDGER_UNAVAILABLE: &str = "ledger_unavailable";
    pub const RATE_LIMITED: &str = "rate_limited";
    pub const CONCURRENCY_LIMIT: &str = "concurrency_limit";
    pub const P2_PAUSED: &str = "p2_paused";
    pub const QUEUE_FULL: &str = "queue_full";
    pub const QUEUE_TIMEOUT: &str = "queue_timeout";
    /// Refused on arrival: the class's queue would keep it past its wait limit.
    pub const QUEUE_DEADLINE: &str = "queue_deadline";
    /// Dropped from a full queue to make room for a more urgent request.
    pub const SHED: &str = "shed_for_priority";
}

/// A request admission turned away. `status` is 429 when the caller is over its own quota,
/// 503 when the gateway is overloaded, and 400/401/403 for identity problems (those carry a
/// zero `retry_after`: retrying will not help, so send no `Retry-After` header).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{status} refused by the {gate} gate ({code}): {message}")]
pub struct Refusal {
    pub status: StatusCode,
    pub gate: &'static str,
    pub code: &'static str,
    pub message: String,
    pub retry_after: Duration,
}

impl Refusal {
    pub(crate) fn new(
        status: StatusCode,
        gate: &'static str,
        code: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Self {
            status,
            gate,
            code,
            message: message.into(),
            retry_after: Duration::ZERO,
        }
    }

    /// True for refusals that tell the client to come back later (429 and 503).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.status,
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
        )
    }

    /// The `Retry-After` header value: whole seconds, rounded up, at least 1 for
    /// retryable refusals; `None` when the header should be omitted.
    pub fn retry_after_header_secs(&self) -> Option<u64> {
        if !self.is_retryable() {
            return None;
        }
        let millis = self.retry_after.as_millis();
        Some((millis.div_ceil(1000) as u64).max(1))
    }

    /// The same advice in milliseconds (the `retry-after-ms` header the OpenAI SDKs read
    /// first): exact where `Retry-After` rounds up to whole seconds.
    pub fn retry_after_header_millis(&self) -> Option<u64> {
        if !self.is_retryable() {
            return None;
        }
        Some(
            u64::try_from(self.retry_after.as_millis())
                .unwrap_or(u64::MAX)
                .max(1),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_header_rounds_up_and_is_omitted_for_identity_errors() {
        let mut refusal = Refusal::new(
            StatusCode::TOO_MANY_REQUESTS,
            gate::RATE,
            code::RATE_LIMITED,
            "x",
        );
        refusal.retry_after = Duration::from_millis(1_001);
        assert_eq!(refusal.retry_after_header_secs(), Some(2));
        assert_eq!(refusal.retry_after_header_millis(), Some(1_001));
        refusal.retry_after = Duration::ZERO;
        assert_eq!(refusal.retry_after_header_secs(), Some(1));
        assert_eq!(refusal.retry_after_header_millis(), Some(1));
        let denied = Refusal::new(
            StatusCode::UNAUTHORIZED,
            gate::IDENTITY,
            code::UNAUTHORIZED,
            "x",
        );
        assert_eq!(denied.retry_after_header_secs(), None);
        assert_eq!(denied.retry_after_header_millis(), None);
    }
}
