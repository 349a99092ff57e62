//! `[admission.gates]`: the budget, token-bucket and per-caller concurrency gates' figures.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct GatesConfig {
    /// Period-budget share (after this request's estimate) above which P2 and warmup are refused.
    pub soft_limit: f64,
    /// Share above which everything but core callers' P0 is refused.
    pub hard_limit: f64,
    /// Token-bucket refill rate = the caller's per-minute quota × this (headroom below the
    /// provider's own limit).
    pub bucket_rate_factor: f64,
    /// Bucket capacity = refill rate × this many seconds: bursts beyond it belong in the queues.
    pub bucket_burst_seconds: f64,
    /// Debt from responses larger than their estimate is bounded at this × capacity, so one
    /// runaway answer cannot lock a caller out for long.
    pub bucket_max_debt_ratio: f64,
    /// Per-caller in-flight limit = the tenant's `peak_in_flight` × this.
    pub peak_factor: f64,
    /// How long a request waits for a per-caller concurrency slot before failing fast.
    pub concurrency_wait_ms: u64,
}

impl Default for GatesConfig {
    fn default() -> Self {
        Self {
            soft_limit: 0.80,
            hard_limit: 0.95,
            bucket_rate_factor: 0.9,
            bucket_burst_seconds: 1.5,
            bucket_max_debt_ratio: 1.0,
            peak_factor: 0.7,
            concurrency_wait_ms: 300,
        }
    }
}
