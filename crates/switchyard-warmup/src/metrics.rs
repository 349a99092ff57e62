//! Warmup metrics (`switchyard_warmup_*`), registered in the registry the owner passes in.
//! Labels are bounded: tier (3), kind (4), result, reason and state are fixed sets; resource
//! names are never labels (use the report for per-resource detail).

use prometheus::{Gauge, HistogramVec, IntCounter, IntCounterVec, IntGauge, Registry};

use crate::registrar::Registrar;

const LATENCY_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

pub(crate) struct WarmupMetrics {
    /// tier, kind, result (warmed, misdirected, failed, skipped).
    pub(crate) runs: IntCounterVec,
    /// tier, reason (budget, degraded).
    pub(crate) skipped: IntCounterVec,
    /// reason (l0_failure, wave_aborted, misdirected, budget).
    pub(crate) alerts: IntCounterVec,
    pub(crate) duration: HistogramVec,
    /// tier.
    pub(crate) tokens: IntCounterVec,
    pub(crate) traffic_tokens: IntCounter,
    /// outcome (led, joined, already_warm, not_lazy, disabled, unknown).
    pub(crate) lazy: IntCounterVec,
    pub(crate) hits: IntCounter,
    pub(crate) misses: IntCounter,
    /// state (warmed, cold).
    pub(crate) first_request: HistogramVec,
    pub(crate) cost_ratio: Gauge,
    pub(crate) hit_rate: Gauge,
    pub(crate) retry_amplification: Gauge,
    pub(crate) budget_tokens: IntGauge,
    pub(crate) budget_spent_tokens: IntGauge,
    pub(crate) max_warmups: IntGauge,
    pub(crate) planned_warmups: IntGauge,
    pub(crate) plan_fits: IntGauge,
    pub(crate) demotion_candidates: IntGauge,
    pub(crate) ramp_step: IntGauge,
    pub(crate) ramp_concurrency: IntGauge,
    /// move (advance, hold, backoff, abort).
    pub(crate) ramp_moves: IntCounterVec,
    /// end (completed, aborted).
    pub(crate) waves: IntCounterVec,
    /// source (observed, too_few_samples, no_data).
    pub(crate) steady_selections: IntCounterVec,
    pub(crate) steady_p95_seconds: Gauge,
}

impl WarmupMetrics {
    pub(crate) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let register = Registrar(registry);
        let histogram = |name: &str, help: &str, labels: &[&str]| {
            register.histogram_vec(name, help, labels, LATENCY_BUCKETS)
        };
        let metrics = Self {
            runs: register.counter_vec(
                "switchyard_warmup_runs_total",
                "Warmup attempts by tier, kind and result (warmed, misdirected, failed, skipped).",
                &["tier", "kind", "result"],
            )?,
            skipped: register.counter_vec(
                "switchyard_warmup_skipped_total",
                "Warmups not attempted, by tier and reason (budget, degraded).",
                &["tier", "reason"],
            )?,
            alerts: register.counter_vec(
                "switchyard_warmup_alerts_total",
                "Warmup alerts by reason (l0_failure, wave_aborted, misdirected, budget).",
                &["reason"],
            )?,
            duration: histogram(
                "switchyard_warmup_duration_seconds",
                "Time one warmup took, by tier.",
                &["tier"],
            )?,
            tokens: register.counter_vec(
                "switchyard_warmup_tokens_total",
                "Tokens spent by warmups, by tier.",
                &["tier"],
            )?,
            traffic_tokens: register.counter(
                "switchyard_warmup_traffic_tokens_total",
                "Tokens spent by non-warmup traffic (the rest of the cost ratio).",
            )?,
            lazy: register.counter_vec(
                "switchyard_warmup_lazy_requests_total",
                "Requests that asked for a lazy (L2) warmup, by outcome (led, joined, \
                 already_warm, not_lazy, disabled, unknown).",
                &["outcome"],
            )?,
            hits: register.counter(
                "switchyard_warmup_hits_total",
                "Warmups whose resource real traffic used within the hit window.",
            )?,
            misses: register.counter(
                "switchyard_warmup_misses_total",
                "Warmups whose resource nobody used within the hit window.",
            )?,
            first_request: histogram(
                "switchyard_warmup_first_request_seconds",
                "Latency of the first real request to a resource, by state (warmed: first \
                 use after a warmup; cold: first use after the resource cooled).",
                &["state"],
            )?,
            cost_ratio: register.gauge(
                "switchyard_warmup_cost_ratio",
                "Warmup spend / total spend in the current budget period.",
            )?,
            hit_rate: register.gauge(
                "switchyard_warmup_hit_rate",
                "Share of judged warmups whose resource was used within the hit window.",
            )?,
            retry_amplification: register.gauge(
                "switchyard_warmup_retry_amplification",
                "Total requests / first attempts, as last reported by the gateway.",
            )?,
            budget_tokens: register.int_gauge(
                "switchyard_warmup_budget_tokens",
                "Warmup budget per period: total quota × (1 − business peak share) × safety.",
            )?,
            budget_spent_tokens: register.int_gauge(
                "switchyard_warmup_budget_spent_tokens",
                "Tokens warmups spent in the current period.",
            )?,
            max_warmups: register.int_gauge(
                "switchyard_warmup_plan_max_warmups",
                "Warmups the budget allows per period at the effective mean cost.",
            )?,
            planned_warmups: register.int_gauge(
                "switchyard_warmup_plan_warmups",
                "Scheduled (L0 + L1) quota-spending warmups planned per period.",
            )?,
            plan_fits: register.int_gauge(
                "switchyard_warmup_plan_fits",
                "1 when the scheduled plan fits the budget, else 0.",
            )?,
            demotion_candidates: register.int_gauge(
                "switchyard_warmup_demotion_candidates",
                "Resources whose hit rate stays under the demotion threshold.",
            )?,
            ramp_step: register.int_gauge(
                "switchyard_warmup_ramp_step",
                "Current ramp step of the running wave (-1: no wave).",
            )?,
            ramp_concurrency: register.int_gauge(
                "switchyard_warmup_ramp_concurrency",
                "Warmups the running wave may run at once (0: no wave).",
            )?,
            ramp_moves: register.counter_vec(
                "switchyard_warmup_ramp_moves_total",
                "Ramp window judgements by move (advance, hold, backoff, abort).",
                &["move"],
            )?,
            waves: register.counter_vec(
                "switchyard_warmup_waves_total",
                "Warmup waves by how they ended (completed, aborted).",
                &["end"],
            )?,
            steady_selections: register.counter_vec(
                "switchyard_warmup_steady_p95_selections_total",
                "Steady p95 chosen for a starting wave, by source (observed: business traffic \
                 over the window; too_few_samples / no_data: the configured value).",
                &["source"],
            )?,
            steady_p95_seconds: register.gauge(
                "switchyard_warmup_steady_p95_seconds",
                "Steady p95 the latest wave's latency is compared with.",
            )?,
        };
        for source in ["observed", "too_few_samples", "no_data"] {
            metrics.steady_selections.with_label_values(&[source]);
        }
        Ok(metrics)
    }

    /// The steady p95 in force (`ms`) and where it came from (`source`, one of the labels
    /// registered above).
    pub(crate) fn note_steady_p95(&self, source: &'static str, ms: u64) {
        self.steady_selections.with_label_values(&[source]).inc();
        self.steady_p95_seconds.set(ms as f64 / 1000.0);
    }
}
