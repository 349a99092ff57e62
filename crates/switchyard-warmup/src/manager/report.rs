//! What the manager tells its owner: per tick, per lazy request, and the full report for
//! the admin API.

use serde::Serialize;
use std::sync::Arc;

use crate::budget::PlanReport;
use crate::clock::UnixMillis;
use crate::config::{ResourceKind, Tier};
use crate::executor::WarmupResult;
use crate::ramp::RampMove;
use crate::schedule::WarmupLimits;

use super::steady::SteadyP95;

/// The running wave.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WaveStatus {
    pub id: u64,
    pub started_unix_ms: UnixMillis,
    pub step: usize,
    pub concurrency: u32,
    pub queued: usize,
    pub running: usize,
    pub warmed: u64,
    pub failed: u64,
    /// What the wave's p95 is compared with (× `advance_max_p95_ratio`), and where it came
    /// from: business traffic before the wave, or the configured fallback.
    pub steady_p95: SteadyP95,
}

/// What one scheduling pass did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TickReport {
    /// Resources that came due and joined the wave.
    pub queued: Vec<Arc<str>>,
    /// Warmups started (the ramp may hold queued ones back).
    pub started: Vec<Arc<str>>,
    pub ramp: Option<RampMove>,
    /// The wave ended with this tick.
    pub wave_completed: bool,
    pub wave_aborted: bool,
    /// Warmups judged misses because their hit window passed unused.
    pub misses_judged: u64,
}

/// What a request's call for a lazy (L2) warmup did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LazyWarm {
    /// Warm already: nothing to do.
    AlreadyWarm,
    /// This request led the one warmup (singleflight).
    Led(WarmupResult),
    /// Another request led it; this one waited for its result.
    Joined(WarmupResult),
    /// Not an L2 resource: scheduled tiers are not warmed on demand.
    NotLazy,
    /// Lazy warmup is off (degradation level 1 and worse, or warmup disabled).
    Disabled,
    Unknown,
}

impl LazyWarm {
    pub(crate) fn label(&self) -> &'static str {
        match self {
            LazyWarm::AlreadyWarm => "already_warm",
            LazyWarm::Led(_) => "led",
            LazyWarm::Joined(_) => "joined",
            LazyWarm::NotLazy => "not_lazy",
            LazyWarm::Disabled => "disabled",
            LazyWarm::Unknown => "unknown",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ResourceReport {
    pub name: Arc<str>,
    pub kind: ResourceKind,
    pub tier: Tier,
    pub warm: bool,
    pub last_warmed_unix_ms: Option<UnixMillis>,
    pub last_used_unix_ms: Option<UnixMillis>,
    pub hits: u64,
    pub misses: u64,
    pub hit_rate: Option<f64>,
    /// Set when the hit rate stays under the demotion threshold: the tier to move it to.
    pub demotion_candidate: Option<Tier>,
}

/// Everything `GET /admin/warmup` should show.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WarmupReport {
    pub enabled: bool,
    pub limits: WarmupLimits,
    pub plan: PlanReport,
    pub period_spent_tokens: u64,
    pub cost_ratio: Option<f64>,
    pub hit_rate: Option<f64>,
    pub retry_amplification: f64,
    pub wave: Option<WaveStatus>,
    pub resources: Vec<ResourceReport>,
}
