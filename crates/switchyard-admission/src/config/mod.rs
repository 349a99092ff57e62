//! Admission tunables. Every field has a default, unknown keys are
//! rejected, and `validate` names the offending field.

mod gates;
mod tenant;
mod validate;

use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchyard_core::Priority;

pub use gates::GatesConfig;
pub use tenant::{PurposeLimits, ScopeLimits, TenantConfig};

/// The `[admission]` section.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdmissionConfig {
    /// Requests dispatched at once across the gateway: the slots the priority queues share.
    pub max_concurrent: u32,
    /// Waiters across all classes; past it a request is refused at once (503) instead of
    /// queueing, so a flood cannot grow memory without bound.
    pub max_queued: u32,
    pub identity: IdentityConfig,
    pub wfq: WfqConfig,
    pub gates: GatesConfig,
    pub retry_after: RetryAfterConfig,
    pub detector: DetectorConfig,
    pub ramp: RampConfig,
    pub adaptive: AdaptiveConfig,
    /// API key → caller. Empty: every request runs as `anonymous` at P1, unauthenticated.
    pub tenants: Vec<TenantConfig>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            max_concurrent: 256,
            max_queued: 4096,
            identity: IdentityConfig::default(),
            wfq: WfqConfig::default(),
            gates: GatesConfig::default(),
            retry_after: RetryAfterConfig::default(),
            detector: DetectorConfig::default(),
            ramp: RampConfig::default(),
            adaptive: AdaptiveConfig::default(),
            tenants: Vec::new(),
        }
    }
}

/// One value per priority class.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PerClass<T> {
    pub p0: T,
    pub p1: T,
    pub p2: T,
}

impl<T: Copy> PerClass<T> {
    pub fn get(&self, priority: Priority) -> T {
        match priority {
            Priority::P0 => self.p0,
            Priority::P1 => self.p1,
            Priority::P2 => self.p2,
        }
    }

    pub fn to_array(&self) -> [T; 3] {
        [self.p0, self.p1, self.p2]
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct IdentityConfig {
    /// Callers with their own metric label; the rest fold into `other`. Configured tenants
    /// take the labels first, in config order.
    pub caller_label_top_n: usize,
    /// A repeated `x-request-id` from the same caller within this window marks a client
    /// retry. 0 disables the memory (only `x-switchyard-retry-count` counts).
    pub request_id_window_ms: u64,
    /// Request ids remembered at most; the oldest are forgotten first.
    pub request_id_capacity: usize,
    /// Who may call without an API key: `auto` (only while no tenant is configured),
    /// `deny` (never, even with no tenants) or `allow` (keyless requests run as `anonymous`
    /// at P1 beside the tenants; a wrong key is still refused).
    pub anonymous: AnonymousAccess,
}

/// Whether requests without an API key are served.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AnonymousAccess {
    /// Anonymous exactly when no tenant is configured.
    #[default]
    Auto,
    Deny,
    Allow,
}

impl Default for IdentityConfig {
    fn default() -> Self {
        Self {
            caller_label_top_n: 50,
            request_id_window_ms: 60_000,
            request_id_capacity: 100_000,
            anonymous: AnonymousAccess::Auto,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WfqConfig {
    /// Share of dispatch slots among backlogged classes (5:2:1 = 62.5/25/12.5 %).
    pub weights: PerClass<f64>,
    /// Floor on a backlogged class's share, whatever the weights say.
    pub min_shares: PerClass<f64>,
    /// Longest wait for a dispatch slot before a 503: urgent traffic may wait longer,
    /// batch traffic fails fast so clients back off.
    pub queue_timeout_ms: PerClass<u64>,
}

impl Default for WfqConfig {
    fn default() -> Self {
        Self {
            weights: PerClass {
                p0: 5.0,
                p1: 2.0,
                p2: 1.0,
            },
            min_shares: PerClass {
                p0: 0.40,
                p1: 0.15,
                p2: 0.05,
            },
            queue_timeout_ms: PerClass {
                p0: 5_000,
                p1: 2_000,
                p2: 1_000,
            },
        }
    }
}

impl WfqConfig {
    pub fn queue_timeout(&self, priority: Priority) -> Duration {
        Duration::from_millis(self.queue_timeout_ms.get(priority))
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RetryAfterConfig {
    /// Backoff for the first refusal; it doubles per retry.
    pub base_ms: u64,
    /// Cap on the exponential part.
    pub cap_ms: u64,
    /// Jitter is uniform in [0, this × backoff] on top; ≥ 0.5 spreads a retry wave out.
    pub jitter_ratio: f64,
}

impl Default for RetryAfterConfig {
    fn default() -> Self {
        Self {
            base_ms: 1_000,
            cap_ms: 60_000,
            jitter_ratio: 0.5,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DetectorConfig {
    /// Sliding window over which queue refusals and request errors are rated.
    pub window_ms: u64,
    /// Fewer events than this in the window: the rate is not trusted.
    pub min_samples: u64,
    /// Share of workers filtered out (reported by the gateway) that signals overload…
    pub enter_filtered_share: f64,
    /// …and the share it must fall to before recovery starts (hysteresis band between).
    pub exit_filtered_share: f64,
    /// Share of queued requests refused for capacity (deadline, timeout, full) that marks
    /// demand overload. Reported and counted only: the gateway's own refusals never cut
    /// capacity (that would cause more refusals), they shed the excess at full capacity.
    pub enter_refusal_rate: f64,
    /// Share of admitted requests that failed (backend distress), entering and leaving
    /// overload.
    pub enter_error_rate: f64,
    pub exit_error_rate: f64,
    /// An entry signal must hold this long before the gateway is marked overloaded.
    pub enter_hold_ms: u64,
    /// The exit signals must hold this long before recovery starts.
    pub exit_hold_ms: u64,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        Self {
            window_ms: 10_000,
            min_samples: 20,
            enter_filtered_share: 0.5,
            exit_filtered_share: 0.2,
            enter_refusal_rate: 0.3,
            enter_error_rate: 0.2,
            exit_error_rate: 0.05,
            enter_hold_ms: 5_000,
            exit_hold_ms: 15_000,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RampConfig {
    /// Shares of `max_concurrent` admitted while recovering, in order; the first is also the
    /// capacity while overloaded, the last must be 1.0.
    pub levels: Vec<f64>,
    /// Time held at each level before climbing.
    pub hold_ms: u64,
    /// Error rate of requests admitted at a level that steps the ramp back one level.
    pub rebound_error_rate: f64,
    /// Finished requests at a level before its error rate is trusted.
    pub min_samples: u64,
    /// While recovering, client retries get at most this share of admissions.
    pub retry_share: f64,
}

impl Default for RampConfig {
    fn default() -> Self {
        Self {
            levels: vec![0.3, 0.5, 0.8, 1.0],
            hold_ms: 30_000,
            rebound_error_rate: 0.05,
            min_samples: 20,
            retry_share: 0.2,
        }
    }
}

/// The adaptive concurrency limit: off by default (`max_concurrent` is the limit). On, the
/// dispatch limit follows the workers' latency (gradient of no-load over current latency)
/// between `min_limit` and `max_concurrent`, so it need not be tuned by hand.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdaptiveConfig {
    pub enabled: bool,
    /// The limit never goes below this; also the concurrency the no-load latency is
    /// measured at.
    pub min_limit: u32,
    /// Shortest window of finished requests between two limit updates.
    pub update_interval_ms: u64,
    /// Latency up to this share above the no-load latency still counts as no load.
    pub rtt_tolerance: f64,
    /// How often the no-load latency is measured again (the limit is pinned to
    /// `min_limit` meanwhile, for `min_rtt_samples` requests).
    pub min_rtt_interval_ms: u64,
    pub min_rtt_samples: u32,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            min_limit: 3,
            update_interval_ms: 250,
            rtt_tolerance: 0.1,
            min_rtt_interval_ms: 60_000,
            min_rtt_samples: 20,
        }
    }
}
