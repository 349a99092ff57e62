//! `[warmup]` and `[degradation]` tunables. Every field has a default,
//! unknown keys are rejected, and `validate` names the offending field.

mod degradation;
mod validate;
mod window;

use serde::{Deserialize, Serialize};
use std::fmt;
use switchyard_core::Priority;

pub use degradation::{ChainConfig, DegradationConfig, ModelProfile, ResponseCacheConfig};
pub use window::PeakWindow;

/// The `[warmup]` section.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WarmupConfig {
    /// Off: nothing is scheduled and lazy warmups are skipped; accounting still runs.
    pub enabled: bool,
    /// How often the manager looks for due warmups and moves its ramp. 0: never on its own;
    /// the owner calls `WarmupManager::tick` (tests, or a gateway that ticks everything).
    pub tick_interval_ms: u64,
    /// Caller tag warmup requests carry through the front door.
    pub caller: String,
    /// Priority of warmup requests; P2 is paused while the gateway is overloaded.
    pub priority: Priority,
    /// A warmed resource counts as a hit when real traffic uses it within this long.
    pub hit_window_secs: u64,
    /// A resource nobody used or warmed for this long is cold again (the first request after
    /// it is a cold first request; L2 warms it again on demand).
    pub cold_after_secs: u64,
    /// A resource whose hit rate stays under this is reported for demotion (L0→L1→L2).
    pub demotion_hit_rate: f64,
    /// Warmups of a resource judged (hit or missed) before its hit rate is trusted.
    pub demotion_min_samples: u64,
    /// After a failed warmup, the next attempt comes this soon instead of a full interval.
    pub failure_retry_secs: u64,
    pub budget: BudgetConfig,
    pub ramp: WarmupRampConfig,
    pub resources: Vec<ResourceConfig>,
}

impl Default for WarmupConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            tick_interval_ms: 1_000,
            caller: "switchyard-warmup".into(),
            priority: Priority::P2,
            hit_window_secs: 300,
            cold_after_secs: 900,
            demotion_hit_rate: 0.30,
            demotion_min_samples: 10,
            failure_retry_secs: 60,
            budget: BudgetConfig::default(),
            ramp: WarmupRampConfig::default(),
            resources: Vec::new(),
        }
    }
}

/// Warmup and quota protection are two hands on one budget:
/// `warmup_budget = total_quota × (1 − business_peak_share) × safety`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Tokens the whole pool may spend per period.
    pub total_quota: u64,
    /// Period length; periods are aligned to the Unix epoch (a day: UTC midnight).
    pub period_secs: u64,
    /// Share of the period's spend that business peaks take.
    pub business_peak_share: f64,
    /// Headroom for bursts and retries: 0.7–0.85 recommended, below 0.5 refused.
    pub safety: f64,
    /// Measured warmups before their mean cost replaces the configured estimates.
    pub mean_cost_min_samples: u64,
    /// Chain-reaction risk on top of retry amplification (a warmup that fails is retried,
    /// and its retries may wake further resources): effective cost =
    /// cost × retry amplification × this.
    pub cascade_factor: f64,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            total_quota: 1_000_000,
            period_secs: 86_400,
            business_peak_share: 0.78,
            safety: 0.8,
            mean_cost_min_samples: 5,
            cascade_factor: 1.0,
        }
    }
}

/// How a warmup wave climbs: concurrency 5 → 15 → 35 → 60 → 100 % of the target.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct WarmupRampConfig {
    /// Shares of `target_concurrency`, strictly increasing, ending at 1.0.
    pub steps: Vec<f64>,
    /// Observation window of each step, seconds (same length as `steps`).
    pub windows_secs: Vec<u64>,
    /// Warmups running at once at 100 %.
    pub target_concurrency: u32,
    /// One instance's minimum warm load: the first step never runs fewer warmups at once.
    pub min_warm_load: u32,
    /// Advance only when the window's error rate is below this…
    pub advance_max_error_rate: f64,
    /// …and its warmup p95 is below this × the steady p95.
    pub advance_max_p95_ratio: f64,
    /// Steady-state p95 latency the ratio compares with when business traffic is too thin
    /// to measure it (fewer than `steady_min_samples` requests in the window).
    pub steady_p95_ms: u64,
    /// The steady p95 is measured on business latency over this trailing window, taken
    /// when a wave starts.
    pub steady_window_secs: u64,
    /// Business requests the window must hold before its p95 replaces `steady_p95_ms`.
    pub steady_min_samples: u64,
    /// A window error rate above this steps back one step (and holds it an extra window).
    pub backoff_error_rate: f64,
    /// This many backoffs in a row abort the wave and alert.
    pub max_consecutive_backoffs: u32,
}

impl Default for WarmupRampConfig {
    fn default() -> Self {
        Self {
            steps: vec![0.05, 0.15, 0.35, 0.60, 1.0],
            windows_secs: vec![30, 30, 45, 60, 60],
            target_concurrency: 20,
            min_warm_load: 1,
            advance_max_error_rate: 0.01,
            advance_max_p95_ratio: 2.0,
            steady_p95_ms: 2_000,
            steady_window_secs: 300,
            steady_min_samples: 50,
            backoff_error_rate: 0.03,
            max_consecutive_backoffs: 2,
        }
    }
}

/// What gets warmed; the costs differ by an order of magnitude.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    /// Keep-alive connection pool to one worker: cheap, no quota.
    Connection,
    /// A real completion that wakes a cold worker: expensive, spends quota.
    Instance,
    /// Pre-fills a head prefix (e.g. a system prompt) on the worker routing will choose.
    Cache,
    /// Refresh of a local snapshot (routing table, limits, credentials): no remote quota.
    Context,
}

impl ResourceKind {
    pub const ALL: [Self; 4] = [Self::Connection, Self::Instance, Self::Cache, Self::Context];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connection => "connection",
            Self::Instance => "instance",
            Self::Cache => "cache",
            Self::Context => "context",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
pub enum Tier {
    /// Always warm: kept warm at a keep-alive interval; a failure alerts.
    #[serde(alias = "l0")]
    L0,
    /// Scheduled: warmed a lead time before peak windows, allowed to cool after.
    #[serde(alias = "l1")]
    L1,
    /// Lazy: the first real request for a cold resource triggers one shared warmup.
    #[serde(alias = "l2")]
    L2,
}

impl Tier {
    pub const ALL: [Self; 3] = [Self::L0, Self::L1, Self::L2];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::L0 => "L0",
            Self::L1 => "L1",
            Self::L2 => "L2",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The tier a demotion candidate moves to; None for L2.
    pub fn demoted(self) -> Option<Self> {
        match self {
            Self::L0 => Some(Self::L1),
            Self::L1 => Some(Self::L2),
            Self::L2 => None,
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a warmup goes. Connection warmups name a `worker`; instance and cache warmups name
/// a `model` plus what business traffic's routing key is derived from (session, user or
/// the prompt's head), so the shared routing-key function picks the same workers; a context
/// refresh names its `snapshot`.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct TargetConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The prompt sent (cache warmups: the head prefix to pre-fill, e.g. a system prompt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
}

/// One `[[warmup.resources]]` entry.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResourceConfig {
    pub name: String,
    pub kind: ResourceKind,
    pub tier: Tier,
    #[serde(default)]
    pub target: TargetConfig,
    /// Tokens one warmup is expected to spend until real costs are measured.
    #[serde(default)]
    pub estimated_cost_tokens: u64,
    /// L0: keep-alive interval. L1: re-warm interval inside a peak span.
    #[serde(default = "default_interval_secs")]
    pub interval_secs: u64,
    /// L1: daily UTC windows, "HH:MM-HH:MM".
    #[serde(default)]
    pub peak_windows: Vec<PeakWindow>,
    /// L1: how long before a window starts it is warmed.
    #[serde(default = "default_lead_time_secs")]
    pub lead_time_secs: u64,
}

fn default_interval_secs() -> u64 {
    1_800
}

fn default_lead_time_secs() -> u64 {
    1_200
}

impl ResourceConfig {
    /// A resource with every optional field at its default.
    pub fn new(name: impl Into<String>, kind: ResourceKind, tier: Tier) -> Self {
        Self {
            name: name.into(),
            kind,
            tier,
            target: TargetConfig::default(),
            estimated_cost_tokens: 0,
            interval_secs: default_interval_secs(),
            peak_windows: Vec::new(),
            lead_time_secs: default_lead_time_secs(),
        }
    }
}
