//! Per-worker Prometheus series. Every label set is bounded (worker names come from the
//! registry, everything else from the fixed lists below), all of a worker's series are
//! created at zero when it joins and removed when it leaves.

use prometheus::{
    GaugeVec, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts,
    Registry as PromRegistry,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::breaker::BreakerState;
use crate::latency::{LatencyFigures, LatencySource};
use crate::status::TransitionReason;

/// Every label `HungCheck::label` gives a hung-engine check, so each series exists from the
/// start.
pub(crate) const HUNG_CHECKS: &[&str] = &[
    "silent",
    "stalled_streams",
    "deferred_gateway_lag",
    "stalls_excused",
];

pub(crate) const STATES: &[&str] = &[
    "healthy",
    "unhealthy",
    "overloaded",
    "draining",
    "circuit_open",
    "hung",
];
const BREAKER_STATES: &[&str] = &["closed", "open", "half_open"];
const SOURCES: &[&str] = &["metrics", "gateway_observed"];
pub(crate) const PROBE_RESULTS: &[&str] = &["success", "slow", "timeout", "error"];
const HEALTH_RESULTS: &[&str] = &["success", "failure"];
pub(crate) const SCRAPE_RESULTS: &[&str] = &["metrics", "gateway_observed", "error"];
pub(crate) const JUDGE_VERDICTS: &[&str] = &[
    "inactive",
    "no_data",
    "normal",
    "marked",
    "sparse",
    "locked",
    "awaiting_probe",
    "recovered",
];

/// Breaker call outcomes, in the order of [`BREAKER_OUTCOMES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BreakerCall {
    Success = 0,
    Slow = 1,
    Failure = 2,
    Rejected = 3,
    Abandoned = 4,
}
const BREAKER_OUTCOMES: [&str; 5] = ["success", "slow", "failure", "rejected", "abandoned"];

/// What took a routable worker out, for `switchyard_worker_failover_seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailoverReason {
    HealthCheck,
    CircuitOpen,
    /// Measured from the worker's last byte to the hung mark.
    Hung,
    /// Measured from the last chunk of the longest-stuck stream to the hung mark.
    StalledStreams,
}

impl FailoverReason {
    const ALL: [FailoverReason; 4] = [
        FailoverReason::HealthCheck,
        FailoverReason::CircuitOpen,
        FailoverReason::Hung,
        FailoverReason::StalledStreams,
    ];

    fn as_str(self) -> &'static str {
        match self {
            FailoverReason::HealthCheck => "health_check",
            FailoverReason::CircuitOpen => "circuit_open",
            FailoverReason::Hung => "hung",
            FailoverReason::StalledStreams => "stalled_streams",
        }
    }
}

/// Health checks run every 1 s (250 ms while suspect), so a default failover lands near
/// 0.5 s; a breaker episode can last minutes on a thin request stream.
const FAILOVER_BUCKETS_SECONDS: &[f64] =
    &[0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0];

/// The metric families, registered once per registry.
#[derive(Debug)]
pub(crate) struct WorkerMetrics {
    state: IntGaugeVec,
    transitions: IntCounterVec,
    ttft_p90: GaugeVec,
    tpot_p90: GaugeVec,
    window_samples: IntGaugeVec,
    probes: IntCounterVec,
    health_checks: IntCounterVec,
    breaker_state: IntGaugeVec,
    breaker_calls: IntCounterVec,
    scrapes: IntCounterVec,
    judge_windows: IntCounterVec,
    hung_checks: IntCounterVec,
    drains: IntCounterVec,
    failover: HistogramVec,
}

const DRAIN_OUTCOMES: &[&str] = &["idle", "timed_out", "interrupted"];

impl WorkerMetrics {
    pub(crate) fn register(registry: &PromRegistry) -> Result<Self, prometheus::Error> {
        let gauge =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntGaugeVec, prometheus::Error> {
                let vec = IntGaugeVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(vec.clone()))?;
                Ok(vec)
            };
        let counter =
            |name: &str, help: &str, labels: &[&str]| -> Result<IntCounterVec, prometheus::Error> {
                let vec = IntCounterVec::new(Opts::new(name, help), labels)?;
                registry.register(Box::new(vec.clone()))?;
                Ok(vec)
            };
        let float = |name: &str, help: &str| -> Result<GaugeVec, prometheus::Error> {
            let vec = GaugeVec::new(Opts::new(name, help), &["worker", "source"])?;
            registry.register(Box::new(vec.clone()))?;
            Ok(vec)
        };
        Ok(Self {
            state: gauge(
                "switchyard_worker_state",
                "1 when the worker is in this state (healthy/unhealthy, overloaded, draining, circuit_open, hung), else 0.",
                &["worker", "state"],
            )?,
            transitions: counter(
                "switchyard_worker_transitions_total",
                "Worker state transitions by reason.",
                &["worker", "reason"],
            )?,
            ttft_p90: float(
                "switchyard_worker_ttft_p90_seconds",
                "TTFT p90 over the collector's last window, by source (NaN without samples).",
            )?,
            tpot_p90: float(
                "switchyard_worker_tpot_p90_seconds",
                "TPOT p90 over the collector's last window, by source (NaN without samples).",
            )?,
            window_samples: gauge(
                "switchyard_worker_latency_window_samples",
                "TTFT samples in the collector's last window.",
                &["worker"],
            )?,
            probes: counter(
                "switchyard_worker_probes_total",
                "Overload prober results (success, slow, timeout, error).",
                &["worker", "result"],
            )?,
            health_checks: counter(
                "switchyard_worker_health_checks_total",
                "Active health check results.",
                &["worker", "result"],
            )?,
            breaker_state: gauge(
                "switchyard_worker_breaker_state",
                "1 for the circuit breaker's current state (closed, open, half_open), else 0.",
                &["worker", "state"],
            )?,
            breaker_calls: counter(
                "switchyard_worker_breaker_calls_total",
                "Calls seen by the circuit breaker by outcome (rejected = not admitted).",
                &["worker", "outcome"],
            )?,
            scrapes: counter(
                "switchyard_worker_latency_scrapes_total",
                "Collector runs by the source used (metrics, gateway_observed) or error.",
                &["worker", "result"],
            )?,
            judge_windows: counter(
                "switchyard_worker_judge_windows_total",
                "Latency windows by the judge's verdict.",
                &["worker", "verdict"],
            )?,
            hung_checks: counter(
                "switchyard_worker_hung_checks_total",
                "Hung checks that saw something, by verdict (silent, stalled_streams: marked \
                 hung; deferred_gateway_lag: over the window only because the gateway ran \
                 late; stalls_excused: stuck streams on a worker still completing answers).",
                &["worker", "verdict"],
            )?,
            drains: {
                let vec = counter(
                    "switchyard_worker_drains_total",
                    "Finished drains by outcome (idle, timed_out, interrupted); not per worker, \
                     since a drained worker's series leave with it.",
                    &["outcome"],
                )?;
                for outcome in DRAIN_OUTCOMES {
                    vec.with_label_values(&[outcome]);
                }
                vec
            },
            failover: {
                let vec = HistogramVec::new(
                    HistogramOpts::new(
                        "switchyard_worker_failover_seconds",
                        "From the first failure of an episode (failed health check, failed or \
                         slow call) to the routable worker being filtered, by reason \
                         (health_check, circuit_open); not per worker.",
                    )
                    .buckets(FAILOVER_BUCKETS_SECONDS.to_vec()),
                    &["reason"],
                )?;
                registry.register(Box::new(vec.clone()))?;
                for reason in FailoverReason::ALL {
                    vec.with_label_values(&[reason.as_str()]);
                }
                vec
            },
        })
    }

    /// `outcome` is one of `idle`, `timed_out`, `interrupted`.
    pub(crate) fn drain_finished(&self, outcome: &str) {
        self.drains.with_label_values(&[outcome]).inc();
    }
}

/// One worker's series. After `forget` every update is a no-op, so a late update from an
/// actor that is still stopping cannot resurrect a removed worker's series.
#[derive(Debug)]
pub(crate) struct WorkerSeries {
    families: Arc<WorkerMetrics>,
    worker: String,
    retired: AtomicBool,
    breaker_calls: Vec<IntCounter>,
}

impl WorkerSeries {
    pub(crate) fn new(families: Arc<WorkerMetrics>, worker: &str) -> Self {
        let f = &families;
        for state in STATES {
            f.state.with_label_values(&[worker, state]).set(0);
        }
        f.state.with_label_values(&[worker, "healthy"]).set(1);
        for reason in TransitionReason::ALL {
            f.transitions.with_label_values(&[worker, reason.as_str()]);
        }
        f.window_samples.with_label_values(&[worker]);
        for result in PROBE_RESULTS {
            f.probes.with_label_values(&[worker, result]);
        }
        for result in HEALTH_RESULTS {
            f.health_checks.with_label_values(&[worker, result]);
        }
        for state in BREAKER_STATES {
            f.breaker_state
                .with_label_values(&[worker, state])
                .set(i64::from(*state == "closed"));
        }
        for result in SCRAPE_RESULTS {
            f.scrapes.with_label_values(&[worker, result]);
        }
        for verdict in JUDGE_VERDICTS {
            f.judge_windows.with_label_values(&[worker, verdict]);
        }
        for verdict in HUNG_CHECKS {
            f.hung_checks.with_label_values(&[worker, verdict]);
        }
        let breaker_calls = BREAKER_OUTCOMES
            .iter()
            .map(|o| f.breaker_calls.with_label_values(&[worker, o]))
            .collect();
        Self {
            families,
            worker: worker.to_string(),
            retired: AtomicBool::new(false),
            breaker_calls,
        }
    }

    fn live(&self) -> bool {
        !self.retired.load(Ordering::Acquire)
    }

    pub(crate) fn set_state(&self, state: &str, on: bool) {
        if self.live() {
            let gauge = self
                .families
                .state
                .with_label_values(&[&self.worker, state]);
            gauge.set(i64::from(on));
        }
    }

    pub(crate) fn transition(&self, reason: TransitionReason) {
        if self.live() {
            let labels = [self.worker.as_str(), reason.as_str()];
            self.families.transitions.with_label_values(&labels).inc();
        }
    }

    pub(crate) fn latency(&self, figures: &LatencyFigures) {
        if !self.live() {
            return;
        }
        let f = &self.families;
        let source = figures.source.as_str();
        let other = match figures.source {
            LatencySource::Metrics => LatencySource::GatewayObserved.as_str(),
            LatencySource::GatewayObserved => LatencySource::Metrics.as_str(),
        };
        for (vec, value) in [
            (&f.ttft_p90, figures.ttft_p90_seconds),
            (&f.tpot_p90, figures.tpot_p90_seconds),
        ] {
            let _ = vec.remove_label_values(&[&self.worker, other]);
            vec.with_label_values(&[&self.worker, source])
                .set(value.unwrap_or(f64::NAN));
        }
        let samples = i64::try_from(figures.ttft_samples).unwrap_or(i64::MAX);
        f.window_samples
            .with_label_values(&[&self.worker])
            .set(samples);
    }

    pub(crate) fn count(&self, family: Family, label: &str) {
        if !self.live() {
            return;
        }
        let f = &self.families;
        let vec = match family {
            Family::Probes => &f.probes,
            Family::HealthChecks => &f.health_checks,
            Family::Scrapes => &f.scrapes,
            Family::JudgeWindows => &f.judge_windows,
            Family::HungChecks => &f.hung_checks,
        };
        vec.with_label_values(&[&self.worker, label]).inc();
    }

    pub(crate) fn breaker_state(&self, state: BreakerState) {
        if self.live() {
            for s in BREAKER_STATES {
                let gauge = self
                    .families
                    .breaker_state
                    .with_label_values(&[self.worker.as_str(), s]);
                gauge.set(i64::from(*s == state.as_str()));
            }
        }
    }

    /// Recorded even after `forget`: the family has no worker label, so nothing resurrects.
    pub(crate) fn failover(&self, reason: FailoverReason, took: Duration) {
        self.families
            .failover
            .with_label_values(&[reason.as_str()])
            .observe(took.as_secs_f64());
    }

    /// Hot path: one atomic add on a pre-resolved counter.
    pub(crate) fn breaker_call(&self, call: BreakerCall) {
        if let Some(counter) = self.breaker_calls.get(call as usize) {
            counter.inc();
        }
    }

    pub(crate) fn forget(&self) {
        self.retired.store(true, Ordering::Release);
        let f = &self.families;
        let w = self.worker.as_str();
        for state in STATES {
            let _ = f.state.remove_label_values(&[w, state]);
        }
        for reason in TransitionReason::ALL {
            let _ = f.transitions.remove_label_values(&[w, reason.as_str()]);
        }
        for source in SOURCES {
            let _ = f.ttft_p90.remove_label_values(&[w, source]);
            let _ = f.tpot_p90.remove_label_values(&[w, source]);
        }
        let _ = f.window_samples.remove_label_values(&[w]);
        let counted: [(&IntCounterVec, &[&str]); 6] = [
            (&f.probes, PROBE_RESULTS),
            (&f.health_checks, HEALTH_RESULTS),
            (&f.scrapes, SCRAPE_RESULTS),
            (&f.judge_windows, JUDGE_VERDICTS),
            (&f.hung_checks, HUNG_CHECKS),
            (&f.breaker_calls, &BREAKER_OUTCOMES),
        ];
        for (vec, labels) in counted {
            for label in labels {
                let _ = vec.remove_label_values(&[w, label]);
            }
        }
        for state in BREAKER_STATES {
            let _ = f.breaker_state.remove_label_values(&[w, state]);
        }
    }
}

/// Counter families updated by label.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Family {
    Probes,
    HealthChecks,
    Scrapes,
    JudgeWindows,
    HungChecks,
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Encoder;

    fn render(registry: &PromRegistry) -> String {
        let mut buf = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut buf)
            .unwrap();
        String::from_utf8(buf).unwrap()
    }

    #[test]
    fn series_appear_at_zero_update_and_vanish_on_forget() {
        let registry = PromRegistry::new();
        let families = Arc::new(WorkerMetrics::register(&registry).unwrap());
        let series = WorkerSeries::new(Arc::clone(&families), "w1");
        let text = render(&registry);
        assert!(text.contains(r#"switchyard_worker_state{state="healthy",worker="w1"} 1"#));
        assert!(text.contains(r#"switchyard_worker_breaker_state{state="closed",worker="w1"} 1"#));
        assert!(text.contains(r#"switchyard_worker_probes_total{result="timeout",worker="w1"} 0"#));

        series.breaker_call(BreakerCall::Rejected);
        series.transition(TransitionReason::OverloadedTtft);
        series.latency(&LatencyFigures {
            source: LatencySource::GatewayObserved,
            ttft_p90_seconds: Some(1.5),
            tpot_p90_seconds: None,
            ttft_samples: 12,
            tpot_samples: 0,
            window_seconds: 5.0,
        });
        let text = render(&registry);
        assert!(text.contains(
            r#"switchyard_worker_breaker_calls_total{outcome="rejected",worker="w1"} 1"#
        ));
        assert!(text.contains(
            r#"switchyard_worker_transitions_total{reason="overloaded_ttft",worker="w1"} 1"#
        ));
        assert!(text.contains(
            r#"switchyard_worker_ttft_p90_seconds{source="gateway_observed",worker="w1"} 1.5"#
        ));

        series.forget();
        series.count(Family::Probes, "success");
        assert!(!render(&registry).contains("w1"));
        // A second registration on the same registry is refused, not silently shared.
        assert!(WorkerMetrics::register(&registry).is_err());
    }
}
