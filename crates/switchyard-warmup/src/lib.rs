//! Warmup and degradation for the Switchyard gateway: two hands on one budget, one spends,
//! one guards.
//!
//! - **Warmup** ([`WarmupManager`]): connection, instance, cache and context resources in
//!   tiers: L0 kept warm at a keep-alive interval (a failure alerts), L1 warmed a lead time
//!   before daily peak windows and left to cool after, L2 warmed lazily by the first real
//!   request with singleflight. Scheduled warmups run in waves whose concurrency climbs a
//!   ramp (5 → 15 → 35 → 60 → 100 %), backing off on errors and aborting after two backoffs.
//!   Every warmup goes through the gateway's front door ([`WarmupExecutor`]), keyed by the
//!   shared routing-key function, and is checked to land where business traffic goes.
//! - **Budget** ([`warmup_budget`], [`plan`]): `total × (1 − peak share) × safety`, max
//!   warmups = budget ÷ effective mean cost, and a report with options when a plan does not fit.
//! - **Accounting**: cost ratio, hit rate (used within 5 min), retry amplification,
//!   first-request latency warmed vs. cold, demotion candidates (hit rate < 30 %).
//! - **Degradation** ([`DegradationController`]): levels 0–3 from the budget water level and
//!   the overload detector, one level at a time, recovering at most one level per 5 min,
//!   must-succeed actions ([`ActionExecutor`]), forced levels and drills, audited; the request
//!   path reads a [`DegradationView`].
//! - **Downgrade chain** ([`plan_downgrade`], [`normalise_chat`], [`ResponseCache`]): alias →
//!   models → cache fallback → friendly error, with prompt normalisation and disclosure.

mod accounting;
mod budget;
mod clock;
mod config;
pub mod degradation;
pub mod downgrade;
mod error;
mod executor;
mod manager;
mod metrics;
mod ramp;
mod registrar;
mod resource;
mod schedule;
mod singleflight;

pub use budget::{PlanInputs, PlanReport, TierDemand, plan, warmup_budget};
pub use clock::UnixMillis;
pub use config::{
    BudgetConfig, ChainConfig, DegradationConfig, ModelProfile, PeakWindow, ResourceConfig,
    ResourceKind, ResponseCacheConfig, TargetConfig, Tier, WarmupConfig, WarmupRampConfig,
};
pub use degradation::{
    ActionExecutor, DegradationAction, DegradationController, DegradationView, Level, Signals,
    Verdict, ViewReader,
};
pub use downgrade::{
    CacheKey, CacheLookup, DowngradeRequest, DowngradeStep, ResponseCache, degraded_headers,
    friendly_error, normalise_chat, plan_downgrade,
};
pub use error::{ActionError, ConfigError, DegradationError, ManagerError, WarmupError};
pub use executor::{SkipReason, WarmupExecutor, WarmupOutcome, WarmupResult};
pub use manager::{
    LatencyHistogram, LazyWarm, ResourceReport, SteadyP95, SteadySource, TickReport, WarmupManager,
    WarmupOptions, WarmupReport, WaveStatus,
};
pub use ramp::{Ramp, RampMove, WindowStats};
pub use resource::WarmupResource;
pub use schedule::WarmupLimits;
pub use singleflight::Flight;
