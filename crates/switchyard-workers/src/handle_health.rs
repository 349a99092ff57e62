//! The worker's condition on its handle: what the request path reads and reports (lock-free
//! except the breaker's short per-worker mutex), and the setters its supervisor uses.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::breaker::{BreakerParams, BreakerState, Call, Transition};
use crate::breaker_gate::CallOutcome;
use crate::handle::WorkerHandle;
use crate::latency::LatencyFigures;
use crate::metrics::{BreakerCall, FailoverReason};
use crate::status::{Routability, TransitionReason, WorkerStatus};

impl WorkerHandle {
    /// Whether the prefilter may offer this worker to the routing policy, or the first reason
    /// it may not (draining, unhealthy, circuit open, hung, overloaded). Atomics only.
    pub fn routability(&self) -> Routability {
        if self.is_draining() {
            Routability::Draining
        } else if !self.is_healthy() {
            Routability::Unhealthy
        } else if !self.breaker.would_admit() {
            Routability::CircuitOpen
        } else if self.is_hung() {
            Routability::Hung
        } else if self.is_overloaded() && self.config.latency_active() {
            Routability::Overloaded
        } else {
            Routability::Routable
        }
    }

    pub fn is_healthy(&self) -> bool {
        self.flags.healthy.load(Ordering::Acquire)
    }

    /// The latency overload mark as the judge left it (routability also checks `active`).
    pub fn is_overloaded(&self) -> bool {
        self.flags.overloaded.load(Ordering::Acquire)
    }

    /// Busy and silent for the hung window while healthy; cleared by the prober.
    pub fn is_hung(&self) -> bool {
        self.flags.hung.load(Ordering::Acquire)
    }

    /// Changes each time the worker is taken out of routing (unhealthy, circuit open,
    /// overloaded, hung — not draining, whose requests may finish): a request still waiting
    /// for its first byte here should leave for another worker at once.
    pub fn subscribe_filtered(&self) -> watch::Receiver<u64> {
        self.filtered.subscribe()
    }

    fn signal_filtered(&self) {
        self.filtered
            .send_modify(|epoch| *epoch = epoch.wrapping_add(1));
    }

    pub fn is_draining(&self) -> bool {
        self.flags.draining.load(Ordering::SeqCst)
    }

    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    /// Asks the circuit breaker to admit one call. Closed: always, lock-free. Open: no, until
    /// the open period ends. Half-open: at most `half_open_permits` trials in total, so call it
    /// once for the worker you will actually send to, and report every admitted call through
    /// [`WorkerHandle::record_outcome`] (`Abandoned` if it was never sent).
    pub fn breaker_admits(&self) -> bool {
        let (admitted, transition) = self.breaker.admit();
        if !admitted {
            self.series.breaker_call(BreakerCall::Rejected);
        }
        if let Some(transition) = transition {
            self.on_breaker_transition(transition);
        }
        admitted
    }

    /// Reports how a call ended: feeds the circuit breaker. Probe traffic never comes here.
    pub fn record_outcome(&self, outcome: CallOutcome) {
        let (call, transition, failover) = self.breaker.record(outcome);
        self.series.breaker_call(match call {
            Call::Success => BreakerCall::Success,
            Call::Slow => BreakerCall::Slow,
            Call::Failure => BreakerCall::Failure,
            Call::Abandoned => BreakerCall::Abandoned,
        });
        if let Some(transition) = transition {
            self.on_breaker_transition(transition);
        }
        // Only when the breaker is what took the worker out (it was not already filtered).
        if let Some(failover) = failover
            && self.routability() == Routability::CircuitOpen
        {
            self.series.failover(FailoverReason::CircuitOpen, failover);
        }
    }

    /// Latency the gateway measured on one response from this worker (TPOT = mean time per
    /// output token after the first, when more than one token came back). Used as the
    /// collector's source when the worker has no usable `/metrics`. Lock-free.
    pub fn observe_latency(&self, ttft: Duration, tpot: Option<Duration>) {
        self.observed.observe(ttft, tpot);
    }

    /// A finished stream of `prompt_tokens` reached its first byte after `ttft`: teaches the
    /// worker's prefill rate (long prompts only). Lock-free.
    pub fn observe_prefill(&self, prompt_tokens: u64, ttft: Duration) {
        self.prefill.observe(prompt_tokens, ttft);
    }

    /// Seconds to first byte per prompt token this worker has shown on long prompts.
    pub fn prefill_seconds_per_token(&self) -> Option<f64> {
        self.prefill.seconds_per_token()
    }

    /// The collector's latest window, if it has produced one.
    pub fn latency(&self) -> Option<Arc<LatencyFigures>> {
        self.latency.load_full()
    }

    pub fn status(&self) -> WorkerStatus {
        let routability = self.routability();
        WorkerStatus {
            name: self.name().to_string(),
            id: self.id(),
            url: self.base_url().to_string(),
            models: self.models().map(|m| m.as_ref().clone()),
            state: routability.into(),
            routability,
            healthy: self.is_healthy(),
            overloaded: self.is_overloaded(),
            hung: self.is_hung(),
            draining: self.is_draining(),
            breaker: self.breaker_state(),
            in_flight: self.in_flight(),
            latency: self.latency().map(|l| l.as_ref().clone()),
            last_transition: self.flags.last_transition(),
            counters: self.flags.counters(),
            engine: self.engine(),
            max_model_len: self.max_model_len(),
            engine_load: self.engine_load(),
        }
    }

    fn on_breaker_transition(&self, transition: Transition) {
        let (reason, state) = match transition {
            Transition::Opened => (TransitionReason::CircuitOpen, BreakerState::Open),
            Transition::HalfOpened => (TransitionReason::CircuitHalfOpen, BreakerState::HalfOpen),
            Transition::Closed => (TransitionReason::CircuitClosed, BreakerState::Closed),
        };
        match transition {
            Transition::Opened => {
                warn!(worker = self.name(), "circuit breaker opened");
                self.signal_filtered();
            }
            _ => info!(
                worker = self.name(),
                state = state.as_str(),
                "circuit breaker"
            ),
        }
        self.note(reason);
        self.series.breaker_state(state);
        self.series
            .set_state("circuit_open", state != BreakerState::Closed);
    }

    pub(crate) fn note(&self, reason: TransitionReason) {
        self.flags.note_transition(reason);
        self.series.transition(reason);
    }

    pub(crate) fn set_healthy(&self, healthy: bool) {
        if self.flags.healthy.swap(healthy, Ordering::AcqRel) == healthy {
            return;
        }
        self.series.set_state("healthy", healthy);
        self.series.set_state("unhealthy", !healthy);
        if healthy {
            info!(worker = self.name(), "worker healthy again");
            self.note(TransitionReason::Healthy);
            // The health checks have just confirmed it answers again: an open breaker would
            // keep a recovered worker out for the rest of its open period (30 s by default,
            // long after an outage ended); let its half-open trial calls decide instead.
            if let Some(transition) = self.breaker.half_open_early() {
                self.on_breaker_transition(transition);
            }
        } else {
            warn!(
                worker = self.name(),
                "worker unhealthy; out of the candidate set"
            );
            self.note(TransitionReason::Unhealthy);
            self.signal_filtered();
        }
    }

    /// Sets or clears the overload mark, counting the transition under `reason`.
    pub(crate) fn set_overloaded(&self, overloaded: bool, reason: TransitionReason) {
        if self.flags.overloaded.swap(overloaded, Ordering::AcqRel) == overloaded {
            return;
        }
        self.series.set_state("overloaded", overloaded);
        info!(
            worker = self.name(),
            overloaded,
            reason = reason.as_str(),
            "overload mark"
        );
        self.note(reason);
        if overloaded && self.config.latency_active() {
            self.signal_filtered();
        }
    }

    /// Sets or clears the hung mark, counting the transition under `reason`; returns
    /// whether it changed.
    pub(crate) fn set_hung(&self, hung: bool, reason: TransitionReason) -> bool {
        if self.flags.hung.swap(hung, Ordering::AcqRel) == hung {
            return false;
        }
        self.series.set_state("hung", hung);
        if hung {
            warn!(
                worker = self.name(),
                reason = reason.as_str(),
                "worker hung: busy and silent while healthy; out of the candidate set"
            );
            self.note(reason);
            self.signal_filtered();
        } else {
            info!(worker = self.name(), "hung worker confirmed back by probes");
            self.note(reason);
        }
        true
    }

    /// Returns `false` if the worker was already draining.
    pub(crate) fn start_drain(&self) -> bool {
        if self.flags.draining.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.series.set_state("draining", true);
        self.note(TransitionReason::Draining);
        true
    }

    pub(crate) fn publish_latency(&self, figures: LatencyFigures) {
        self.series.latency(&figures);
        self.latency.store(Some(Arc::new(figures)));
    }

    pub(crate) fn reconfigure_breaker(&self, params: BreakerParams) {
        self.breaker.reconfigure(params);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigCell, HealthConfig};
    use crate::handle::HandleContext;
    use crate::metrics::WorkerMetrics;
    use crate::spec::WorkerSpec;
    use switchyard_core::{ManualClock, WorkerId};

    fn handle(clock: &ManualClock) -> (Arc<WorkerHandle>, Arc<ConfigCell>) {
        let config = Arc::new(ConfigCell::new(HealthConfig::default()));
        let ctx = HandleContext {
            config: Arc::clone(&config),
            clock: Arc::new(clock.clone()),
            metrics: Arc::new(WorkerMetrics::register(&prometheus::Registry::new()).unwrap()),
            upstream: crate::handle::tests::test_upstream(),
        };
        let spec = WorkerSpec::parse_flag("w=http://127.0.0.1:1").unwrap();
        (
            Arc::new(WorkerHandle::new(WorkerId(7), &spec, &ctx).unwrap()),
            config,
        )
    }

    #[test]
    fn routability_reports_the_first_reason_in_order() {
        let clock = ManualClock::new();
        let (w, _) = handle(&clock);
        assert_eq!(w.routability(), Routability::Routable);
        w.set_overloaded(true, TransitionReason::OverloadedTpot);
        assert_eq!(w.routability(), Routability::Overloaded);
        for _ in 0..30 {
            w.record_outcome(CallOutcome::Failure);
        }
        assert_eq!(w.routability(), Routability::CircuitOpen);
        w.set_healthy(false);
        assert_eq!(w.routability(), Routability::Unhealthy);
        assert!(w.start_drain());
        assert!(!w.start_drain());
        assert_eq!(w.routability(), Routability::Draining);
        let status = w.status();
        assert_eq!(status.state, crate::WorkerState::Draining);
        assert_eq!(status.breaker, BreakerState::Open);
        assert!(status.overloaded && !status.healthy);
        assert_eq!(status.counters.transitions, 4);
        assert_eq!(status.last_transition, Some("draining"));
    }

    #[test]
    fn overloaded_only_filters_while_latency_aware_is_active() {
        let clock = ManualClock::new();
        let (w, config) = handle(&clock);
        w.set_overloaded(true, TransitionReason::OverloadedTtft);
        let mut off = HealthConfig::default();
        off.latency_aware.active = false;
        config.store(Arc::new(off));
        assert_eq!(w.routability(), Routability::Routable);
    }

    #[test]
    fn open_breaker_becomes_routable_when_due_and_admits_five_trials() {
        let clock = ManualClock::new();
        let (w, _) = handle(&clock);
        for _ in 0..15 {
            w.record_outcome(CallOutcome::Success {
                ttfb: Duration::from_millis(10),
            });
        }
        // 4xx are reported as successes by the gateway; 15 failures of 30 -> 50 %.
        for _ in 0..15 {
            w.record_outcome(CallOutcome::Failure);
        }
        assert!(!w.breaker_admits());
        clock.advance(Duration::from_secs(30));
        assert_eq!(w.routability(), Routability::Routable);
        let admitted = (0..7).filter(|_| w.breaker_admits()).count();
        assert_eq!(admitted, 5);
        assert_eq!(w.routability(), Routability::CircuitOpen);
        for _ in 0..5 {
            w.record_outcome(CallOutcome::Success {
                ttfb: Duration::from_millis(10),
            });
        }
        assert_eq!(w.breaker_state(), BreakerState::Closed);
        assert_eq!(w.routability(), Routability::Routable);
    }

    #[test]
    fn health_coming_back_half_opens_an_open_breaker_before_its_period_ends() {
        let clock = ManualClock::new();
        let (w, _) = handle(&clock);
        for _ in 0..30 {
            w.record_outcome(CallOutcome::Failure);
        }
        w.set_healthy(false);
        clock.advance(Duration::from_secs(10));
        assert_eq!(w.breaker_state(), BreakerState::Open);
        w.set_healthy(true);
        assert_eq!(w.breaker_state(), BreakerState::HalfOpen, "20 s early");
        assert_eq!(w.routability(), Routability::Routable);
        let admitted = (0..7).filter(|_| w.breaker_admits()).count();
        assert_eq!(admitted, 5, "still only the trial permits");
        for _ in 0..5 {
            w.record_outcome(CallOutcome::Failure);
        }
        assert_eq!(
            w.breaker_state(),
            BreakerState::Open,
            "failed trials open it again for a whole period"
        );
        w.set_healthy(true);
        assert_eq!(
            w.breaker_state(),
            BreakerState::Open,
            "no transition of health, no early trial"
        );
        assert!(!w.breaker_admits());
    }
}
