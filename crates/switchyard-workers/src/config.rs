//! Everything about how workers are watched: health checks, the latency-aware overload marker,
//! its prober, the circuit breaker and draining. One hot-reloadable document.

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthConfig {
    pub health: HealthCheckConfig,
    pub latency_aware: LatencyAwareConfig,
    pub prober: ProberConfig,
    pub breaker: BreakerConfig,
    pub drain: DrainConfig,
    pub hung: HungConfig,
}

/// Active health checks: out after 3 consecutive failures, back after 5 successes (leaving
/// fast, returning only once it is clearly well, so a flapping worker stays out).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthCheckConfig {
    /// Default path; a worker's `health_path` overrides it (e.g. `/v1/models`).
    pub path: String,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    /// Cadence after a failure while the worker is still healthy (HAProxy's `fastinter`), so
    /// the remaining failures needed to take it out arrive fast (failover < 2 s with defaults).
    /// Set it equal to `interval_ms` to disable.
    pub suspect_interval_ms: u64,
    pub unhealthy_threshold: u32,
    pub healthy_threshold: u32,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        Self {
            path: "/health".into(),
            interval_ms: 1000,
            timeout_ms: 1000,
            suspect_interval_ms: 250,
            unhealthy_threshold: 3,
            healthy_threshold: 5,
        }
    }
}

/// The latency overload marker: collector, hysteresis judge.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LatencyAwareConfig {
    /// Off: no marks, no filtering, existing marks cleared at once; raw figures keep flowing.
    pub active: bool,
    pub scrape_interval_ms: u64,
    pub scrape_timeout_ms: u64,
    /// A window with fewer TTFT samples cannot clear a mark.
    pub min_samples: u64,
    /// A sparse window keeps growing (scrape after scrape) until it has `min_samples` or
    /// reaches this age, so a filtered worker that only sees probe traffic can still recover.
    pub max_window_ms: u64,
    pub overload_ttft_p90_ms: u64,
    pub overload_tpot_p90_ms: u64,
    pub recover_ttft_p90_ms: u64,
    pub recover_tpot_p90_ms: u64,
}

impl Default for LatencyAwareConfig {
    fn default() -> Self {
        Self {
            active: true,
            scrape_interval_ms: 5000,
            scrape_timeout_ms: 2000,
            min_samples: 10,
            max_window_ms: 60_000,
            overload_ttft_p90_ms: 30_000,
            overload_tpot_p90_ms: 300,
            recover_ttft_p90_ms: 16_000,
            recover_tpot_p90_ms: 80,
        }
    }
}

/// The prober that runs only while a worker is marked overloaded.
///
/// A probe is a streamed completion shaped like traffic (a real prompt, several output
/// tokens), judged by the thresholds that clear a mark: its time to first token must stay
/// under `latency_aware.recover_ttft_p90_ms` and its time per output token under
/// `latency_aware.recover_tpot_p90_ms`. A one-token probe of a tiny prompt would answer fast
/// even from a worker whose decode is still slow, and clear a mark that real traffic re-sets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProberConfig {
    pub interval_ms: u64,
    /// A probe not finished within this (or failing) counts as a failure; keep it above
    /// `recover_ttft_p90_ms` + `max_tokens` × `recover_tpot_p90_ms` on real GPUs.
    pub latency_bound_ms: u64,
    pub successes_to_confirm: u32,
    pub failures_to_rearm: u32,
    pub path: String,
    pub prompt: String,
    /// Output tokens per probe (≥ 2, so time per output token can be measured).
    pub max_tokens: u32,
}

impl Default for ProberConfig {
    fn default() -> Self {
        Self {
            interval_ms: 2000,
            latency_bound_ms: 3000,
            successes_to_confirm: 3,
            failures_to_rearm: 3,
            path: "/v1/completions".into(),
            prompt: DEFAULT_PROBE_PROMPT.into(),
            max_tokens: 8,
        }
    }
}

/// About a hundred words: enough prefill and context to look like a short real request.
const DEFAULT_PROBE_PROMPT: &str = "You are a helpful assistant. A customer writes: \
    I ordered a pair of running shoes last week, the tracking page has not changed for three days and the delivery \
    estimate has passed. I need them for a race on Saturday. Could you check where the \
    parcel is, tell me whether it will arrive in time, and if not, what my options are \
    for a refund or an express replacement? Please answer briefly and politely, cite the \
    order number if you have it, and do not invent a tracking code.";

/// Per-worker circuit breaker, Resilience4j semantics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerConfig {
    pub window_size: u32,
    pub minimum_calls: u32,
    pub failure_rate_threshold: f64,
    pub slow_call_rate_threshold: f64,
    pub slow_call_ms: u64,
    pub open_ms: u64,
    pub half_open_permits: u32,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            window_size: 100,
            minimum_calls: 30,
            failure_rate_threshold: 0.5,
            slow_call_rate_threshold: 0.8,
            slow_call_ms: 3000,
            open_ms: 30_000,
            half_open_permits: 5,
        }
    }
}

/// Hung-engine detection: a worker with requests in flight and no byte from any of them
/// for `quiet_ms` (or twice its TTFT p90, if longer), while `/health` says 200, is taken
/// out; the prober (`prober.*`) confirms it is back as for an overload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HungConfig {
    pub active: bool,
    pub quiet_ms: u64,
    /// How often the silence is checked.
    pub check_interval_ms: u64,
    /// Streams stuck mid-answer (no chunk for the hung window) that mark a worker hung
    /// while it completes nothing and they are at least half of its answering streams;
    /// 0 switches this signal off.
    pub stalled_streams: u32,
}

impl Default for HungConfig {
    fn default() -> Self {
        Self {
            active: true,
            quiet_ms: 1500,
            check_interval_ms: 250,
            stalled_streams: 2,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DrainConfig {
    pub timeout_ms: u64,
}

impl Default for DrainConfig {
    fn default() -> Self {
        Self { timeout_ms: 30_000 }
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid health config: `{field}` {reason}")]
pub struct HealthConfigError {
    pub field: &'static str,
    pub reason: String,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> HealthConfigError {
    HealthConfigError {
        field,
        reason: reason.into(),
    }
}

fn positive(field: &'static str, value: u64) -> Result<(), HealthConfigError> {
    if value == 0 {
        return Err(invalid(field, "must be greater than 0"));
    }
    Ok(())
}

fn a_path(field: &'static str, value: &str) -> Result<(), HealthConfigError> {
    if !value.starts_with('/') {
        return Err(invalid(
            field,
            format!("must start with `/`, got `{value}`"),
        ));
    }
    Ok(())
}

fn a_rate(field: &'static str, value: f64) -> Result<(), HealthConfigError> {
    if !(value > 0.0 && value <= 1.0) {
        return Err(invalid(field, format!("must be in (0, 1], got {value}")));
    }
    Ok(())
}

impl HealthConfig {
    /// Checks every field; the error names the first offending one (`section.field`).
    pub fn validate(&self) -> Result<(), HealthConfigError> {
        let h = &self.health;
        a_path("health.path", &h.path)?;
        positive("health.interval_ms", h.interval_ms)?;
        positive("health.timeout_ms", h.timeout_ms)?;
        positive("health.suspect_interval_ms", h.suspect_interval_ms)?;
        if h.suspect_interval_ms > h.interval_ms {
            return Err(invalid(
                "health.suspect_interval_ms",
                "must not exceed health.interval_ms",
            ));
        }
        positive("health.unhealthy_threshold", h.unhealthy_threshold.into())?;
        positive("health.healthy_threshold", h.healthy_threshold.into())?;

        let l = &self.latency_aware;
        positive("latency_aware.scrape_interval_ms", l.scrape_interval_ms)?;
        positive("latency_aware.scrape_timeout_ms", l.scrape_timeout_ms)?;
        positive("latency_aware.min_samples", l.min_samples)?;
        if l.max_window_ms < l.scrape_interval_ms {
            return Err(invalid(
                "latency_aware.max_window_ms",
                "must be at least latency_aware.scrape_interval_ms",
            ));
        }
        positive("latency_aware.overload_ttft_p90_ms", l.overload_ttft_p90_ms)?;
        positive("latency_aware.overload_tpot_p90_ms", l.overload_tpot_p90_ms)?;
        positive("latency_aware.recover_ttft_p90_ms", l.recover_ttft_p90_ms)?;
        positive("latency_aware.recover_tpot_p90_ms", l.recover_tpot_p90_ms)?;
        // Without a gap between the two thresholds there is no hysteresis, only thrashing.
        if l.recover_ttft_p90_ms >= l.overload_ttft_p90_ms {
            return Err(invalid(
                "latency_aware.recover_ttft_p90_ms",
                "must be below latency_aware.overload_ttft_p90_ms",
            ));
        }
        if l.recover_tpot_p90_ms >= l.overload_tpot_p90_ms {
            return Err(invalid(
                "latency_aware.recover_tpot_p90_ms",
                "must be below latency_aware.overload_tpot_p90_ms",
            ));
        }

        let p = &self.prober;
        positive("prober.interval_ms", p.interval_ms)?;
        positive("prober.latency_bound_ms", p.latency_bound_ms)?;
        positive("prober.successes_to_confirm", p.successes_to_confirm.into())?;
        positive("prober.failures_to_rearm", p.failures_to_rearm.into())?;
        a_path("prober.path", &p.path)?;
        if p.prompt.is_empty() {
            return Err(invalid("prober.prompt", "must not be empty"));
        }
        if p.max_tokens < 2 {
            return Err(invalid(
                "prober.max_tokens",
                "must be at least 2 (time per output token needs two tokens)",
            ));
        }

        let b = &self.breaker;
        positive("breaker.window_size", b.window_size.into())?;
        positive("breaker.minimum_calls", b.minimum_calls.into())?;
        if b.minimum_calls > b.window_size {
            return Err(invalid(
                "breaker.minimum_calls",
                "must not exceed breaker.window_size",
            ));
        }
        a_rate("breaker.failure_rate_threshold", b.failure_rate_threshold)?;
        a_rate(
            "breaker.slow_call_rate_threshold",
            b.slow_call_rate_threshold,
        )?;
        positive("breaker.slow_call_ms", b.slow_call_ms)?;
        positive("breaker.open_ms", b.open_ms)?;
        positive("breaker.half_open_permits", b.half_open_permits.into())?;

        positive("drain.timeout_ms", self.drain.timeout_ms)?;
        positive("hung.quiet_ms", self.hung.quiet_ms)?;
        positive("hung.check_interval_ms", self.hung.check_interval_ms)?;
        if self.hung.check_interval_ms > self.hung.quiet_ms {
            return Err(invalid(
                "hung.check_interval_ms",
                "must not exceed hung.quiet_ms",
            ));
        }
        Ok(())
    }
}

pub(crate) fn ms(value: u64) -> Duration {
    Duration::from_millis(value)
}

/// The live configuration: actors load it on every tick; the request path reads only the
/// `latency_active` mirror (one atomic).
#[derive(Debug)]
pub(crate) struct ConfigCell {
    current: ArcSwap<HealthConfig>,
    latency_active: AtomicBool,
}

impl ConfigCell {
    pub(crate) fn new(config: HealthConfig) -> Self {
        let active = config.latency_aware.active;
        Self {
            current: ArcSwap::from_pointee(config),
            latency_active: AtomicBool::new(active),
        }
    }

    pub(crate) fn load(&self) -> Arc<HealthConfig> {
        self.current.load_full()
    }

    pub(crate) fn latency_active(&self) -> bool {
        self.latency_active.load(Ordering::Acquire)
    }

    pub(crate) fn store(&self, config: Arc<HealthConfig>) {
        self.latency_active
            .store(config.latency_aware.active, Ordering::Release);
        self.current.store(config);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_spec_numbers_and_valid() {
        let c = HealthConfig::default();
        c.validate().unwrap();
        assert_eq!(c.health.interval_ms, 1000);
        assert_eq!(c.health.unhealthy_threshold, 3);
        assert_eq!(c.health.healthy_threshold, 5);
        assert_eq!(c.latency_aware.overload_ttft_p90_ms, 30_000);
        assert_eq!(c.latency_aware.recover_tpot_p90_ms, 80);
        assert_eq!(c.breaker.window_size, 100);
        assert_eq!(c.breaker.half_open_permits, 5);
        assert_eq!(c.drain.timeout_ms, 30_000);
    }

    #[test]
    fn partial_toml_fills_defaults_and_unknown_fields_are_rejected() {
        let c: HealthConfig =
            toml::from_str("[latency_aware]\nactive = false\n[prober]\ninterval_ms = 500\n")
                .unwrap();
        assert!(!c.latency_aware.active);
        assert_eq!(c.prober.interval_ms, 500);
        assert_eq!(c.prober.latency_bound_ms, 3000);
        assert!(toml::from_str::<HealthConfig>("[breaker]\nwindow = 3\n").is_err());
        assert!(toml::from_str::<HealthConfig>("[nope]\n").is_err());
    }

    #[test]
    fn validate_names_the_field() {
        let mut c = HealthConfig::default();
        c.latency_aware.recover_ttft_p90_ms = 30_000;
        assert_eq!(
            c.validate().unwrap_err().field,
            "latency_aware.recover_ttft_p90_ms"
        );
        let mut c = HealthConfig::default();
        c.breaker.failure_rate_threshold = 1.5;
        assert_eq!(
            c.validate().unwrap_err().field,
            "breaker.failure_rate_threshold"
        );
        let mut c = HealthConfig::default();
        c.health.path = "health".into();
        assert_eq!(c.validate().unwrap_err().field, "health.path");
        let mut c = HealthConfig::default();
        c.breaker.minimum_calls = 200;
        assert_eq!(c.validate().unwrap_err().field, "breaker.minimum_calls");
        let mut c = HealthConfig::default();
        c.hung.check_interval_ms = 5000;
        assert_eq!(c.validate().unwrap_err().field, "hung.check_interval_ms");
        let mut c = HealthConfig::default();
        c.prober.interval_ms = 0;
        let err = c.validate().unwrap_err();
        assert_eq!(err.field, "prober.interval_ms");
        assert!(err.to_string().contains("prober.interval_ms"));
    }

    #[test]
    fn cell_mirrors_the_active_switch() {
        let cell = ConfigCell::new(HealthConfig::default());
        assert!(cell.latency_active());
        let mut off = HealthConfig::default();
        off.latency_aware.active = false;
        cell.store(Arc::new(off));
        assert!(!cell.latency_active());
        assert!(!cell.load().latency_aware.active);
    }
}
