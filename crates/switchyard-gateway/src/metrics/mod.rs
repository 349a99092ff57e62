//! Gateway metrics, Prometheus text format. Every series is `switchyard_`-prefixed with base
//! units in the name; labels are bounded (route, status, worker names from the registry,
//! policy branches from a fixed set).

use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use switchyard_router::RoutingStats;
use switchyard_workers::WorkerDirectory;

pub mod degradation;
mod handles;
mod routing;

pub use handles::Lazy;
use routing::RoutingMetrics;

/// The number of `Route`s, for the per-route handles.
pub const ROUTES: usize = 9;

const LATENCY_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0,
];

pub struct Metrics {
    registry: Registry,
    pub requests: IntCounterVec,
    pub request_duration: HistogramVec,
    pub ttft: HistogramVec,
    /// `request_duration` and `ttft` by route (index: `Route as usize`).
    pub request_duration_by_route: Lazy<HistogramVec, ROUTES>,
    pub ttft_by_route: Lazy<HistogramVec, ROUTES>,
    pub in_flight: IntGauge,
    pub worker_in_flight: IntGaugeVec,
    pub workers_registered: IntGauge,
    pub routing_decisions: IntCounterVec,
    pub upstream_errors: IntCounterVec,
    pub client_disconnects: IntCounterVec,
    pub upstream_attempts: IntCounterVec,
    /// `upstream_attempts` by kind: 0 `first`, 1 `retry`.
    pub upstream_attempts_by_kind: Lazy<IntCounterVec, 2>,
    pub retries_denied: IntCounterVec,
    /// Attempts by how their first byte went: in_time, deadline, rescued.
    pub first_byte: IntCounterVec,
    /// `first_byte{outcome="in_time"}`.
    pub first_byte_in_time: prometheus::IntCounter,
    pub retry_amplification: prometheus::Gauge,
    routing: RoutingMetrics,
    pub workers_filtered: IntCounterVec,
    pub filtered_per_request: prometheus::Histogram,
    pub prefix_hits: IntCounterVec,
    pub breaker_rejections: prometheus::IntCounter,
    /// Per-worker load spread: coefficient of variation of in-flight requests.
    worker_load_cv: prometheus::Gauge,
}

#[derive(Debug, thiserror::Error)]
#[error("metrics setup failed: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

impl Metrics {
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "switchyard_requests_total",
                "Requests answered, by route, HTTP status and worker (`none` when not routed).",
            ),
            &["route", "status", "worker"],
        )?;
        let request_duration = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_request_duration_seconds",
                "End-to-end latency from request arrival to the last byte of the response.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["route"],
        )?;
        let ttft = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_time_to_first_token_seconds",
                "Time from request arrival to the first response body bytes from the worker.",
            )
            .buckets(LATENCY_BUCKETS.to_vec()),
            &["route"],
        )?;
        let in_flight = IntGauge::new(
            "switchyard_in_flight_requests",
            "Requests currently being served.",
        )?;
        let worker_in_flight = IntGaugeVec::new(
            Opts::new(
                "switchyard_worker_in_flight_requests",
                "Requests in flight per worker.",
            ),
            &["worker"],
        )?;
        let workers_registered = IntGauge::new(
            "switchyard_workers_registered",
            "Workers currently in the registry.",
        )?;
        let routing_decisions = IntCounterVec::new(
            Opts::new(
                "switchyard_routing_decisions_total",
                "Routing decisions by policy and the branch of the policy that decided.",
            ),
            &["policy", "branch"],
        )?;
        let upstream_errors = IntCounterVec::new(
            Opts::new(
                "switchyard_upstream_errors_total",
                "Failed calls to workers by kind (connect, timeout, status_5xx, body).",
            ),
            &["kind"],
        )?;
        let client_disconnects = IntCounterVec::new(
            Opts::new(
                "switchyard_client_disconnects_total",
                "Responses abandoned by the client before the end; the upstream request is cancelled.",
            ),
            &["route"],
        )?;
        let upstream_attempts = IntCounterVec::new(
            Opts::new(
                "switchyard_upstream_attempts_total",
                "Requests sent to workers: `first` attempts and gateway `retry` attempts.",
            ),
            &["kind"],
        )?;
        let retries_denied = IntCounterVec::new(
            Opts::new(
                "switchyard_retries_denied_total",
                "Failed attempts not retried, by reason (max_retries, budget_rate, budget_ratio, no_other_worker).",
            ),
            &["reason"],
        )?;
        let retry_amplification = prometheus::Gauge::new(
            "switchyard_retry_amplification",
            "Upstream attempts divided by first attempts since start (1.0 = no retries).",
        )?;
        registry.register(Box::new(upstream_attempts.clone()))?;
        registry.register(Box::new(retries_denied.clone()))?;
        let first_byte = IntCounterVec::new(
            Opts::new(
                "switchyard_attempt_first_byte_total",
                "Attempts by how their first byte went: in_time, deadline (missed its first-byte deadline, retried if the budget allows), rescued (its worker was filtered while it waited; moved at once).",
            ),
            &["outcome"],
        )?;
        for outcome in ["in_time", "deadline", "rescued"] {
            first_byte.with_label_values(&[outcome]);
        }
        let first_byte_in_time = first_byte.with_label_values(&["in_time"]);
        registry.register(Box::new(first_byte.clone()))?;
        registry.register(Box::new(retry_amplification.clone()))?;
        let worker_load_cv = prometheus::Gauge::new(
            "switchyard_worker_load_cv",
            "Coefficient of variation of in-flight requests across workers (0 = perfectly even).",
        )?;
        registry.register(Box::new(worker_load_cv.clone()))?;
        let routing = RoutingMetrics::new(&registry)?;
        let workers_filtered = IntCounterVec::new(
            Opts::new(
                "switchyard_prefilter_workers_filtered_total",
                "Workers dropped from a request's candidates by the prefilter chain, by reason.",
            ),
            &["reason"],
        )?;
        let filtered_per_request = prometheus::Histogram::with_opts(
            HistogramOpts::new(
                "switchyard_prefilter_filtered_workers",
                "Workers filtered out per routing decision.",
            )
            .buckets(vec![0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]),
        )?;
        let prefix_hits = IntCounterVec::new(
            Opts::new(
                "switchyard_prefix_cache_hits_total",
                "Cache-aware outcomes: logical (prefix known on some worker), physical (request \
                 landed on the holder), virtual (known, but the holder was filtered).",
            ),
            &["kind"],
        )?;
        let breaker_rejections = prometheus::IntCounter::new(
            "switchyard_breaker_rejections_total",
            "Chosen workers whose half-open circuit breaker had no trial permit left.",
        )?;
        for reason in [
            "draining",
            "unhealthy",
            "circuit_open",
            "overloaded",
            "context_too_short",
        ] {
            workers_filtered.with_label_values(&[reason]);
        }
        for kind in ["logical", "physical", "virtual"] {
            prefix_hits.with_label_values(&[kind]);
        }
        registry.register(Box::new(workers_filtered.clone()))?;
        registry.register(Box::new(filtered_per_request.clone()))?;
        registry.register(Box::new(prefix_hits.clone()))?;
        registry.register(Box::new(breaker_rejections.clone()))?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(request_duration.clone()))?;
        registry.register(Box::new(ttft.clone()))?;
        registry.register(Box::new(in_flight.clone()))?;
        registry.register(Box::new(worker_in_flight.clone()))?;
        registry.register(Box::new(workers_registered.clone()))?;
        registry.register(Box::new(routing_decisions.clone()))?;
        registry.register(Box::new(upstream_errors.clone()))?;
        registry.register(Box::new(client_disconnects.clone()))?;
        let telemetry = crate::telemetry::counters();
        registry.register(Box::new(telemetry.exported.clone()))?;
        registry.register(Box::new(telemetry.dropped.clone()))?;
        Ok(Self {
            registry,
            requests,
            request_duration_by_route: Lazy::new(request_duration.clone()),
            ttft_by_route: Lazy::new(ttft.clone()),
            request_duration,
            ttft,
            in_flight,
            worker_in_flight,
            workers_registered,
            routing_decisions,
            upstream_errors,
            client_disconnects,
            upstream_attempts_by_kind: Lazy::new(upstream_attempts.clone()),
            upstream_attempts,
            retries_denied,
            first_byte_in_time,
            first_byte,
            retry_amplification,
            routing,
            worker_load_cv,
            workers_filtered,
            filtered_per_request,
            prefix_hits,
            breaker_rejections,
        })
    }

    /// The registry other components (admission, worker health) register their series in.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Pre-registers the series of a policy's branches so dashboards see zeros, not gaps.
    pub fn register_policy(&self, policy: &str, branches: &[&str]) {
        for branch in branches {
            self.routing_decisions.with_label_values(&[policy, branch]);
        }
    }

    pub fn forget_worker(&self, worker: &str) {
        let _ = self.worker_in_flight.remove_label_values(&[worker]);
    }

    /// Renders the text exposition, refreshing the gauges that are read from live state.
    pub fn render(&self, directory: &WorkerDirectory, routing: &RoutingStats) -> String {
        self.routing.update(routing);
        let workers = directory.snapshot();
        let loads: Vec<f64> = workers.iter().map(|w| w.in_flight() as f64).collect();
        self.worker_load_cv.set(coefficient_of_variation(&loads));
        self.workers_registered.set(workers.len() as i64);
        for worker in workers.iter() {
            self.worker_in_flight
                .with_label_values(&[worker.name()])
                .set(worker.in_flight() as i64);
        }
        let first = self.upstream_attempts.with_label_values(&["first"]).get();
        let retry = self.upstream_attempts.with_label_values(&["retry"]).get();
        if first > 0 {
            self.retry_amplification
                .set((first + retry) as f64 / first as f64);
        }
        let mut buffer = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut buffer) {
            tracing::warn!(%error, "metrics encoding failed");
        }
        String::from_utf8_lossy(&buffer).into_owned()
    }
}

/// Population standard deviation over mean; 0 for no load or a single worker.
fn coefficient_of_variation(values: &[f64]) -> f64 {
    if values.len() < 2 {
        return 0.0;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if mean == 0.0 {
        return 0.0;
    }
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    variance.sqrt() / mean
}

#[cfg(test)]
mod tests {
    use super::coefficient_of_variation;

    #[test]
    fn every_route_has_its_own_handle() {
        use crate::openai::Route;
        assert_eq!(Route::Passthrough as usize + 1, super::ROUTES);
    }

    #[test]
    fn cv_is_zero_when_even_and_grows_with_spread() {
        assert_eq!(coefficient_of_variation(&[3.0, 3.0, 3.0]), 0.0);
        assert_eq!(coefficient_of_variation(&[0.0, 0.0]), 0.0);
        let cv = coefficient_of_variation(&[1.0, 3.0]);
        assert!((cv - 0.5).abs() < 1e-12, "{cv}");
    }
}
