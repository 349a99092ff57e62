//! Admission metrics, registered in the gateway's registry. Labels are bounded: class (3),
//! gate and code (fixed sets), caller (top-N tenants + `anonymous`/`unknown`/`other`).

use prometheus::{
    Gauge, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};
use std::sync::OnceLock;
use switchyard_core::Priority;

use crate::capacity::adaptive::Decision;
use crate::gates::Settlement;
use crate::overload::{GatewayState, Verdict};

/// How a slot was handed out, one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DispatchPath {
    /// Taken free on arrival.
    Free,
    /// A queued class below its guaranteed minimum share, served first.
    Guarantee,
    /// A queued request picked by weighted fair queuing.
    Wfq,
}

impl DispatchPath {
    pub(crate) const ALL: [DispatchPath; 3] = [
        DispatchPath::Free,
        DispatchPath::Guarantee,
        DispatchPath::Wfq,
    ];

    fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            DispatchPath::Free => "free_slot",
            DispatchPath::Guarantee => "guarantee",
            DispatchPath::Wfq => "wfq",
        }
    }
}

const WAIT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// The gauges and counters the dispatcher keeps current.
#[derive(Clone)]
pub(crate) struct QueueGauges {
    pub(crate) queue_depth: [IntGauge; 3],
    pub(crate) in_use: IntGauge,
    pub(crate) capacity: IntGauge,
    /// Dispatch slots the adaptive concurrency limit allows (0 when it is off).
    pub(crate) adaptive_limit: IntGauge,
    /// What the adaptive limit did on each update, by decision.
    pub(crate) adaptive_decisions: IntCounterVec,
    /// The dispatch counters by class and path, looked up once: every admission counts one,
    /// and finding a series by its label values hashes them.
    pub(crate) dispatches: [[IntCounter; 3]; 3],
}

impl QueueGauges {
    pub(crate) fn dispatched(&self, class: Priority, path: DispatchPath) {
        self.dispatches[class.index()][path.index()].inc();
    }

    pub(crate) fn adaptive_decided(&self, decision: Decision) {
        self.adaptive_decisions
            .with_label_values(&[decision.as_str()])
            .inc();
    }
}

pub(crate) struct AdmissionMetrics {
    pub(crate) queue: QueueGauges,
    queue_wait: HistogramVec,
    /// Series of `queue_wait` by class, then admitted or refused, each made on first use (as
    /// `with_label_values` makes it) and kept: every admission observes one.
    queue_wait_series: [[OnceLock<Histogram>; 2]; 3],
    admitted: IntCounterVec,
    refusals: IntCounterVec,
    identity: IntCounterVec,
    /// The `anonymous` and `tenant` series of `identity`, kept on first use: every request
    /// counts one.
    identified: [OnceLock<IntCounter>; 2],
    client_retries: IntCounterVec,
    state: IntGaugeVec,
    transitions: IntCounterVec,
    ramp_ratio: Gauge,
    ramp_steps: IntCounterVec,
    bucket_settlements: IntCounterVec,
    filtered_share: Gauge,
    degradation_ratio: Gauge,
    verdicts: IntCounterVec,
}

impl AdmissionMetrics {
    pub(crate) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let queue_depth_vec = IntGaugeVec::new(
            Opts::new(
                "switchyard_admission_queue_depth",
                "Requests waiting for a dispatch slot, by class.",
            ),
            &["class"],
        )?;
        let in_use = IntGauge::new(
            "switchyard_admission_dispatch_slots_in_use",
            "Dispatch slots held by admitted requests.",
        )?;
        let capacity = IntGauge::new(
            "switchyard_admission_dispatch_slots_capacity",
            "Dispatch slots currently offered (max_concurrent × the recovery ramp level).",
        )?;
        let adaptive_limit = IntGauge::new(
            "switchyard_admission_adaptive_limit",
            "Dispatch slots the adaptive concurrency limit allows now (0 when it is off).",
        )?;
        let adaptive_decisions = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_adaptive_decisions_total",
                "Adaptive limit decisions: probe_started / probe_measured (no-load latency), grew, shrank, held_at_floor (a cut stopped at the concurrency of the best recent throughput), held_idle (demand below half the limit).",
            ),
            &["decision"],
        )?;
        for decision in Decision::ALL {
            adaptive_decisions.with_label_values(&[decision.as_str()]);
        }
        let dispatches = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_dispatches_total",
                "Dispatch slots handed out, by class and path (free_slot on arrival, guarantee: a class below its minimum share served first, wfq: picked by weighted fair queuing).",
            ),
            &["class", "path"],
        )?;
        let dispatch_counts = Priority::ALL.map(|class| {
            DispatchPath::ALL
                .map(|path| dispatches.with_label_values(&[class.as_str(), path.as_str()]))
        });
        let queue_wait = HistogramVec::new(
            HistogramOpts::new(
                "switchyard_admission_queue_wait_seconds",
                "Time spent queued for a dispatch slot, by class and outcome (admitted, refused).",
            )
            .buckets(WAIT_BUCKETS.to_vec()),
            &["class", "outcome"],
        )?;
        let admitted = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_admitted_total",
                "Requests admitted, by class and caller label.",
            ),
            &["class", "caller"],
        )?;
        let refusals = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_refusals_total",
                "Requests refused, by gate, reason code, class and caller label.",
            ),
            &["gate", "code", "class", "caller"],
        )?;
        let identity = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_identity_total",
                "Identity resolutions by outcome (tenant, anonymous, unauthorized, forbidden, bad_header).",
            ),
            &["outcome"],
        )?;
        let client_retries = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_client_retries_total",
                "Requests recognised as client retries, by what admission did (admitted, deferred, refused).",
            ),
            &["outcome"],
        )?;
        let state = IntGaugeVec::new(
            Opts::new(
                "switchyard_admission_gateway_state",
                "1 for the gateway's current overload state (normal, overloaded, recovering).",
            ),
            &["state"],
        )?;
        let transitions = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_state_transitions_total",
                "Overload state changes.",
            ),
            &["from", "to"],
        )?;
        let ramp_ratio = Gauge::new(
            "switchyard_admission_ramp_capacity_ratio",
            "Share of max_concurrent currently admitted (1 in normal state).",
        )?;
        let ramp_steps = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_ramp_steps_total",
                "Recovery ramp moves: up a level, back one on an error rebound, or cut_deeper while overloaded when the distress deepened (more workers filtered, or requests failing).",
            ),
            &["direction"],
        )?;
        let bucket_settlements = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_bucket_settlements_total",
                "Token-bucket corrections to real usage (exact, refund, debt, debt_capped).",
            ),
            &["outcome"],
        )?;
        let filtered_share = Gauge::new(
            "switchyard_admission_fleet_filtered_ratio",
            "Share of workers filtered out, as last reported to the overload detector.",
        )?;
        registry.register(Box::new(queue_depth_vec.clone()))?;
        registry.register(Box::new(in_use.clone()))?;
        registry.register(Box::new(capacity.clone()))?;
        registry.register(Box::new(adaptive_limit.clone()))?;
        registry.register(Box::new(adaptive_decisions.clone()))?;
        registry.register(Box::new(dispatches.clone()))?;
        registry.register(Box::new(queue_wait.clone()))?;
        registry.register(Box::new(admitted.clone()))?;
        registry.register(Box::new(refusals.clone()))?;
        registry.register(Box::new(identity.clone()))?;
        registry.register(Box::new(client_retries.clone()))?;
        registry.register(Box::new(state.clone()))?;
        registry.register(Box::new(transitions.clone()))?;
        registry.register(Box::new(ramp_ratio.clone()))?;
        registry.register(Box::new(ramp_steps.clone()))?;
        registry.register(Box::new(bucket_settlements.clone()))?;
        let degradation_ratio = Gauge::new(
            "switchyard_admission_degradation_capacity_ratio",
            "Share of max_concurrent that graded degradation allows (1 when undegraded).",
        )?;
        degradation_ratio.set(1.0);
        registry.register(Box::new(filtered_share.clone()))?;
        registry.register(Box::new(degradation_ratio.clone()))?;
        for outcome in Settlement::ALL {
            bucket_settlements.with_label_values(&[outcome.as_str()]);
        }
        for direction in ["up", "back", "cut_deeper"] {
            ramp_steps.with_label_values(&[direction]);
        }
        let verdicts = IntCounterVec::new(
            Opts::new(
                "switchyard_admission_detector_verdicts_total",
                "Times the overload detector's reading of its inputs changed to this verdict (healthy, demand_overload, backend_filtered, backend_errors); only backend_* engage the recovery ramp.",
            ),
            &["verdict"],
        )?;
        registry.register(Box::new(verdicts.clone()))?;
        for verdict in Verdict::ALL {
            verdicts.with_label_values(&[verdict.as_str()]);
        }
        let metrics = Self {
            queue: QueueGauges {
                queue_depth: Priority::ALL
                    .map(|class| queue_depth_vec.with_label_values(&[class.as_str()])),
                in_use,
                capacity,
                adaptive_limit,
                adaptive_decisions,
                dispatches: dispatch_counts,
            },
            queue_wait,
            queue_wait_series: Default::default(),
            admitted,
            refusals,
            identity,
            identified: Default::default(),
            client_retries,
            state,
            transitions,
            ramp_ratio,
            ramp_steps,
            bucket_settlements,
            filtered_share,
            degradation_ratio,
            verdicts,
        };
        metrics.set_state(GatewayState::Normal, 1.0);
        Ok(metrics)
    }

    pub(crate) fn queue_wait(&self, class: Priority, admitted: bool, seconds: f64) {
        let outcome = if admitted { "admitted" } else { "refused" };
        self.queue_wait_series[class.index()][usize::from(!admitted)]
            .get_or_init(|| {
                self.queue_wait
                    .with_label_values(&[class.as_str(), outcome])
            })
            .observe(seconds);
    }

    pub(crate) fn admitted(&self, class: Priority, caller_label: &str) {
        self.admitted
            .with_label_values(&[class.as_str(), caller_label])
            .inc();
    }

    pub(crate) fn refused(&self, gate: &str, code: &str, class: &str, caller_label: &str) {
        self.refusals
            .with_label_values(&[gate, code, class, caller_label])
            .inc();
    }

    pub(crate) fn identity(&self, outcome: &str) {
        self.identity.with_label_values(&[outcome]).inc();
    }

    /// [`Self::identity`] for a request that was identified: as an anonymous caller or as
    /// a tenant.
    pub(crate) fn identified(&self, anonymous: bool) {
        let outcome = if anonymous { "anonymous" } else { "tenant" };
        self.identified[usize::from(!anonymous)]
            .get_or_init(|| self.identity.with_label_values(&[outcome]))
            .inc();
    }

    pub(crate) fn client_retry(&self, outcome: &str) {
        self.client_retries.with_label_values(&[outcome]).inc();
    }

    pub(crate) fn set_state(&self, state: GatewayState, capacity_ratio: f64) {
        for candidate in GatewayState::ALL {
            self.state
                .with_label_values(&[candidate.as_str()])
                .set(i64::from(candidate == state));
        }
        self.ramp_ratio.set(capacity_ratio);
    }

    pub(crate) fn set_degradation_ratio(&self, ratio: f64) {
        self.degradation_ratio.set(ratio);
    }

    pub(crate) fn transition(&self, from: GatewayState, to: GatewayState) {
        self.transitions
            .with_label_values(&[from.as_str(), to.as_str()])
            .inc();
    }

    pub(crate) fn verdict(&self, verdict: Verdict) {
        self.verdicts.with_label_values(&[verdict.as_str()]).inc();
    }

    pub(crate) fn ramp_step(&self, direction: &str) {
        self.ramp_steps.with_label_values(&[direction]).inc();
    }

    pub(crate) fn bucket_settled(&self, outcome: Settlement) {
        self.bucket_settlements
            .with_label_values(&[outcome.as_str()])
            .inc();
    }

    pub(crate) fn filtered_share(&self, share: f64) {
        self.filtered_share.set(share);
    }
}

#[cfg(test)]
impl QueueGauges {
    /// Gauges registered nowhere, for dispatcher tests.
    pub(crate) fn detached() -> Self {
        let gauge = |name: &str| IntGauge::new(name, "test").unwrap();
        Self {
            queue_depth: [gauge("d0"), gauge("d1"), gauge("d2")],
            in_use: gauge("in_use"),
            capacity: gauge("capacity"),
            adaptive_limit: gauge("adaptive_limit"),
            adaptive_decisions: IntCounterVec::new(
                Opts::new("adaptive_decisions", "test"),
                &["decision"],
            )
            .unwrap(),
            dispatches: {
                let vec = IntCounterVec::new(Opts::new("dispatches", "test"), &["class", "path"])
                    .unwrap();
                Priority::ALL.map(|class| {
                    DispatchPath::ALL
                        .map(|path| vec.with_label_values(&[class.as_str(), path.as_str()]))
                })
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_series_count_under_their_own_labels() {
        let registry = Registry::new();
        let metrics = AdmissionMetrics::new(&registry).unwrap();
        metrics.queue_wait(Priority::P1, true, 0.5);
        metrics.queue_wait(Priority::P1, true, 0.25);
        metrics.queue_wait(Priority::P2, false, 2.0);
        let wait = |class: &str, outcome: &str| {
            let series = metrics.queue_wait.with_label_values(&[class, outcome]);
            (series.get_sample_count(), series.get_sample_sum())
        };
        assert_eq!(wait("P1", "admitted"), (2, 0.75));
        assert_eq!(wait("P2", "refused"), (1, 2.0));
        assert_eq!(wait("P1", "refused"), (0, 0.0));
        assert_eq!(wait("P0", "admitted"), (0, 0.0));
        metrics.queue.dispatched(Priority::P0, DispatchPath::Wfq);
        metrics.queue.dispatched(Priority::P0, DispatchPath::Wfq);
        metrics.queue.dispatched(Priority::P2, DispatchPath::Free);
        let families = registry.gather();
        let dispatches = families
            .iter()
            .find(|family| family.name() == "switchyard_admission_dispatches_total")
            .unwrap();
        let count = |class: &str, path: &str| {
            dispatches
                .get_metric()
                .iter()
                .find(|metric| {
                    let labels = metric.get_label();
                    labels
                        .iter()
                        .any(|l| l.name() == "class" && l.value() == class)
                        && labels
                            .iter()
                            .any(|l| l.name() == "path" && l.value() == path)
                })
                .map(|metric| metric.get_counter().get_value())
        };
        assert_eq!(count("P0", "wfq"), Some(2.0));
        assert_eq!(count("P2", "free_slot"), Some(1.0));
        assert_eq!(count("P1", "guarantee"), Some(0.0), "made up front");
        metrics.identified(true);
        metrics.identified(false);
        metrics.identified(false);
        metrics.identity("unauthorized");
        let identity = |outcome: &str| metrics.identity.with_label_values(&[outcome]).get();
        assert_eq!(identity("anonymous"), 1);
        assert_eq!(identity("tenant"), 2);
        assert_eq!(identity("unauthorized"), 1);
    }
}
