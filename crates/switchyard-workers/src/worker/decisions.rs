//! The supervisor's decisions, apart from the actor plumbing: the health streaks and the
//! hysteresis judge, and what their verdicts do to the worker's published condition.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use super::hung::{Evidence, GatewayLag, HungCheck, check, hung_window};
use crate::breaker::BreakerParams;
use crate::config::{HealthConfig, ms};
use crate::handle::WorkerHandle;
use crate::health_tracker::{HealthTracker, HealthVerdict};
use crate::judge::{Judge, JudgeThresholds, OverloadReason, ProbeVerdict, WindowVerdict};
use crate::latency::LatencyFigures;
use crate::metrics::{FailoverReason, Family};
use crate::status::{Routability, TransitionReason};

/// How one overload probe went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProbeResult {
    Success,
    /// Answered, but its first token or its time per token was above the recovery threshold.
    Slow,
    /// No answer within `prober.latency_bound_ms`.
    Timeout,
    /// Transport error, non-2xx status, or no model known to probe with.
    Error,
}

impl ProbeResult {
    fn label(self) -> &'static str {
        match self {
            ProbeResult::Success => "success",
            ProbeResult::Slow => "slow",
            ProbeResult::Timeout => "timeout",
            ProbeResult::Error => "error",
        }
    }
}

pub(crate) struct WorkerCore {
    handle: Arc<WorkerHandle>,
    health: HealthTracker,
    /// When the current streak of failed health checks on a healthy worker began.
    failing_since: Option<Instant>,
    judge: Judge,
    /// Consecutive successful probes since the worker was marked hung.
    hung_probe_successes: u32,
    /// How late the hung checks ran: time the gateway itself was not reading any bytes.
    lag: GatewayLag,
}

impl WorkerCore {
    /// Resumes from what the handle publishes, so a restarted supervisor keeps the state.
    pub(crate) fn new(handle: Arc<WorkerHandle>) -> Self {
        Self {
            health: HealthTracker::new(handle.is_healthy()),
            failing_since: None,
            judge: Judge::resume(handle.is_overloaded()),
            hung_probe_successes: 0,
            lag: GatewayLag::default(),
            handle,
        }
    }

    /// The prober runs exactly while the worker is marked overloaded or hung.
    pub(crate) fn wants_prober(&self) -> bool {
        self.judge.is_overloaded() || self.handle.is_hung()
    }

    /// Periodic: a healthy worker busy and silent for the hung window, or whose streams are
    /// stuck mid-answer while it completes nothing, is marked hung (`hung.rs`).
    pub(crate) fn on_watch(&mut self, config: &HealthConfig) {
        let h = &self.handle;
        let now = h.breaker.now();
        self.lag.tick(now, ms(config.hung.check_interval_ms));
        if !config.hung.active {
            h.set_hung(false, TransitionReason::HungRecovered);
            return;
        }
        if h.is_hung() || !h.is_healthy() || h.is_draining() {
            return;
        }
        let evidence = Evidence {
            now,
            silence: h.silence(),
            streams: h.progress.census(),
        };
        let window = hung_window(config, h.latency().as_deref());
        let verdict = check(&evidence, window, config.hung.stalled_streams, &self.lag);
        if let Some(label) = verdict.label() {
            h.series.count(Family::HungChecks, label);
        }
        let (reason, failover, took) = match verdict {
            HungCheck::Silent(silence) => (TransitionReason::Hung, FailoverReason::Hung, silence),
            HungCheck::StalledStreams { streams, longest } => {
                tracing::warn!(
                    worker = h.name(),
                    streams,
                    "streams stuck mid-answer while the worker completes nothing"
                );
                (
                    TransitionReason::HungStalledStreams,
                    FailoverReason::StalledStreams,
                    longest,
                )
            }
            HungCheck::Fine | HungCheck::DeferredForGatewayLag | HungCheck::StallsExcused => {
                return;
            }
        };
        let was_routable = h.routability() == Routability::Routable;
        if h.set_hung(true, reason) {
            self.hung_probe_successes = 0;
            if was_routable {
                h.series.failover(failover, took);
            }
        }
    }

    pub(crate) fn on_health(&mut self, success: bool, config: &HealthConfig) {
        let h = &self.handle;
        let (counter, label) = if success {
            (&h.flags.health_successes, "success")
        } else {
            (&h.flags.health_failures, "failure")
        };
        counter.fetch_add(1, Ordering::Relaxed);
        h.series.count(Family::HealthChecks, label);
        let c = &config.health;
        let now = h.breaker.now();
        match self
            .health
            .observe(success, c.unhealthy_threshold, c.healthy_threshold)
        {
            HealthVerdict::BecameUnhealthy => {
                let since = self.failing_since.take().unwrap_or(now);
                // Counted only if the health checks are what took the worker out.
                if h.routability() == Routability::Routable {
                    let took = now.saturating_duration_since(since);
                    h.series.failover(FailoverReason::HealthCheck, took);
                }
                h.set_healthy(false);
            }
            HealthVerdict::Suspect => {
                self.failing_since.get_or_insert(now);
            }
            HealthVerdict::BecameHealthy => h.set_healthy(true),
            HealthVerdict::Healthy | HealthVerdict::Unhealthy => self.failing_since = None,
        }
    }

    pub(crate) fn on_window(&mut self, figures: &LatencyFigures, config: &HealthConfig) {
        let verdict = self
            .judge
            .observe_window(figures, &JudgeThresholds::from_config(config));
        let h = &self.handle;
        let label = match verdict {
            WindowVerdict::Inactive => {
                h.set_overloaded(false, TransitionReason::ClearedInactive);
                "inactive"
            }
            WindowVerdict::NoData => "no_data",
            WindowVerdict::Normal => "normal",
            WindowVerdict::Marked(reason) => {
                let reason = match reason {
                    OverloadReason::Ttft => TransitionReason::OverloadedTtft,
                    OverloadReason::Tpot => TransitionReason::OverloadedTpot,
                };
                h.set_overloaded(true, reason);
                "marked"
            }
            WindowVerdict::Sparse => "sparse",
            WindowVerdict::Locked => "locked",
            WindowVerdict::AwaitingProbe => "awaiting_probe",
            WindowVerdict::Recovered => {
                h.set_overloaded(false, TransitionReason::Recovered);
                "recovered"
            }
        };
        h.series.count(Family::JudgeWindows, label);
    }

    pub(crate) fn on_probe(&mut self, result: ProbeResult, config: &HealthConfig) {
        let h = &self.handle;
        let success = result == ProbeResult::Success;
        let counter = if success {
            &h.flags.probe_successes
        } else {
            &h.flags.probe_failures
        };
        counter.fetch_add(1, Ordering::Relaxed);
        h.series.count(Family::Probes, result.label());
        if h.is_hung() {
            self.hung_probe_successes = if success {
                self.hung_probe_successes.saturating_add(1)
            } else {
                0
            };
            if self.hung_probe_successes >= config.prober.successes_to_confirm {
                h.progress.forgive();
                h.set_hung(false, TransitionReason::HungRecovered);
                self.hung_probe_successes = 0;
            }
        }
        match self
            .judge
            .observe_probe(success, &JudgeThresholds::from_config(config))
        {
            ProbeVerdict::Recovered => h.set_overloaded(false, TransitionReason::Recovered),
            ProbeVerdict::Rearmed => h.note(TransitionReason::Rearmed),
            ProbeVerdict::Ignored if !config.latency_aware.active => {
                h.set_overloaded(false, TransitionReason::ClearedInactive);
            }
            ProbeVerdict::Ignored | ProbeVerdict::Counting | ProbeVerdict::Confirmed => {}
        }
    }

    /// A reload: switching the marker off clears the mark at once; breaker parameters apply
    /// immediately; intervals are read by the children on their next tick.
    pub(crate) fn on_config(&mut self, config: &HealthConfig) {
        if !config.latency_aware.active {
            self.judge.clear();
            self.handle
                .set_overloaded(false, TransitionReason::ClearedInactive);
        }
        self.handle
            .reconfigure_breaker(BreakerParams::from_config(&config.breaker));
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::handle::tests::test_context;
    use crate::latency::LatencySource;
    use crate::spec::WorkerSpec;
    use crate::status::Routability;
    use std::time::Duration;
    use switchyard_core::WorkerId;

    fn core() -> (WorkerCore, Arc<WorkerHandle>) {
        let spec = WorkerSpec::parse_flag("w=http://127.0.0.1:1").unwrap();
        let handle = Arc::new(WorkerHandle::new(WorkerId(1), &spec, &test_context()).unwrap());
        (WorkerCore::new(Arc::clone(&handle)), handle)
    }

    /// A core on a manual clock with its own metrics registry, for time-driven decisions.
    pub(crate) fn clocked_core() -> (
        switchyard_core::ManualClock,
        prometheus::Registry,
        WorkerCore,
        Arc<WorkerHandle>,
    ) {
        let clock = switchyard_core::ManualClock::new();
        let registry = prometheus::Registry::new();
        let ctx = crate::handle::HandleContext {
            clock: Arc::new(clock.clone()),
            metrics: Arc::new(crate::metrics::WorkerMetrics::register(&registry).unwrap()),
            ..test_context()
        };
        let spec = WorkerSpec::parse_flag("w=http://127.0.0.1:1").unwrap();
        let handle = Arc::new(WorkerHandle::new(WorkerId(1), &spec, &ctx).unwrap());
        let core = WorkerCore::new(Arc::clone(&handle));
        (clock, registry, core, handle)
    }

    fn figures(ttft: f64, tpot: f64) -> LatencyFigures {
        LatencyFigures {
            source: LatencySource::Metrics,
            ttft_p90_seconds: Some(ttft),
            tpot_p90_seconds: Some(tpot),
            ttft_samples: 50,
            tpot_samples: 500,
            window_seconds: 5.0,
        }
    }

    #[test]
    fn health_results_flip_the_published_flag() {
        let (mut core, handle) = core();
        let config = HealthConfig::default();
        for _ in 0..3 {
            core.on_health(false, &config);
        }
        assert_eq!(handle.routability(), Routability::Unhealthy);
        for _ in 0..5 {
            core.on_health(true, &config);
        }
        assert_eq!(handle.routability(), Routability::Routable);
        let counters = handle.status().counters;
        assert_eq!(
            (
                counters.health_check_failures,
                counters.health_check_successes
            ),
            (3, 5)
        );
        assert_eq!(counters.transitions, 2);
    }

    /// (sample count, sum in seconds) of `switchyard_worker_failover_seconds{reason}`.
    fn failover(registry: &prometheus::Registry, reason: &str) -> (u64, f64) {
        let family = registry
            .gather()
            .into_iter()
            .find(|f| f.name() == "switchyard_worker_failover_seconds")
            .unwrap();
        let metric = family
            .get_metric()
            .iter()
            .find(|m| m.get_label()[0].value() == reason)
            .unwrap();
        let h = metric.get_histogram();
        (h.get_sample_count(), h.get_sample_sum())
    }

    #[test]
    fn failover_time_runs_from_the_first_failed_check_of_the_streak() {
        let (clock, registry, mut core, handle) = clocked_core();
        let config = HealthConfig::default();
        // A failure cleared by a success does not start the episode.
        core.on_health(false, &config);
        clock.advance(Duration::from_secs(10));
        core.on_health(true, &config);
        clock.advance(Duration::from_secs(10));
        core.on_health(false, &config);
        for _ in 0..2 {
            clock.advance(Duration::from_millis(250));
            core.on_health(false, &config);
        }
        assert_eq!(handle.routability(), Routability::Unhealthy);
        assert_eq!(failover(&registry, "health_check"), (1, 0.5));

        // Back, then out again while the breaker already filters it: not a health failover.
        for _ in 0..5 {
            core.on_health(true, &config);
        }
        for _ in 0..30 {
            handle.record_outcome(crate::CallOutcome::Failure);
        }
        assert_eq!(failover(&registry, "circuit_open"), (1, 0.0));
        for _ in 0..3 {
            core.on_health(false, &config);
        }
        assert_eq!(failover(&registry, "health_check"), (1, 0.5));
    }

    #[test]
    fn overload_mark_needs_latency_and_probes_and_survives_a_restart() {
        let (mut core, handle) = core();
        let config = HealthConfig::default();
        core.on_window(&figures(31.0, 0.01), &config);
        assert!(core.wants_prober());
        assert_eq!(handle.routability(), Routability::Overloaded);
        // The supervisor restarts: the mark is resumed from the handle.
        let mut core = WorkerCore::new(Arc::clone(&handle));
        assert!(core.wants_prober());
        core.on_window(&figures(1.0, 0.01), &config);
        assert!(handle.is_overloaded());
        core.on_probe(ProbeResult::Success, &config);
        core.on_probe(ProbeResult::Timeout, &config);
        for _ in 0..3 {
            core.on_probe(ProbeResult::Success, &config);
        }
        assert!(!handle.is_overloaded());
        assert!(!core.wants_prober());
        let counters = handle.status().counters;
        assert_eq!((counters.probe_successes, counters.probe_failures), (4, 1));
    }

    #[test]
    fn switching_the_marker_off_clears_at_once() {
        let (mut core, handle) = core();
        let mut config = HealthConfig::default();
        core.on_window(&figures(1.0, 0.5), &config);
        assert!(handle.is_overloaded());
        config.latency_aware.active = false;
        core.on_config(&config);
        assert!(!handle.is_overloaded());
        assert!(!core.wants_prober());
        core.on_window(&figures(100.0, 5.0), &config);
        assert!(!handle.is_overloaded(), "no marks while inactive");
        assert_eq!(handle.status().last_transition, Some("cleared_inactive"));
    }

    #[test]
    fn a_busy_silent_healthy_worker_is_marked_hung_and_probes_bring_it_back() {
        let (clock, registry, mut core, handle) = clocked_core();
        let config = HealthConfig::default();
        let filtered = handle.subscribe_filtered();

        // Idle for a long time: never hung.
        clock.advance(Duration::from_secs(60));
        core.on_watch(&config);
        assert!(!handle.is_hung());
        let mut guard = handle.start_request();
        guard.expect_bytes_within(Duration::ZERO);
        clock.advance(Duration::from_millis(1000));
        core.on_watch(&config);
        handle.note_progress();
        // Checked on time (every 250 ms): a late check would discount its own lag.
        for _ in 0..5 {
            clock.advance(Duration::from_millis(250));
            core.on_watch(&config);
        }
        clock.advance(Duration::from_millis(150));
        core.on_watch(&config);
        assert!(!handle.is_hung(), "a byte 1.4 s ago is within the window");
        assert!(!filtered.has_changed().unwrap());
        clock.advance(Duration::from_millis(200));
        core.on_watch(&config);
        assert_eq!(handle.routability(), Routability::Hung);
        assert_eq!(handle.status().state, crate::WorkerState::Hung);
        assert!(
            filtered.has_changed().unwrap(),
            "requests waiting on it are told"
        );
        assert!(core.wants_prober());
        assert_eq!(failover(&registry, "hung"), (1, 1.6));

        // Recovery takes `successes_to_confirm` probes in a row.
        core.on_probe(ProbeResult::Success, &config);
        core.on_probe(ProbeResult::Timeout, &config);
        core.on_probe(ProbeResult::Success, &config);
        core.on_probe(ProbeResult::Success, &config);
        assert!(handle.is_hung());
        core.on_probe(ProbeResult::Success, &config);
        assert!(!handle.is_hung());
        assert!(!core.wants_prober());
        assert_eq!(handle.routability(), Routability::Routable);
        assert_eq!(handle.status().last_transition, Some("hung_recovered"));
        drop(guard);
    }

    #[test]
    fn a_long_quiet_spell_due_to_a_request_or_a_slow_ttft_is_not_a_hang() {
        let clock = switchyard_core::ManualClock::new();
        let ctx = crate::handle::HandleContext {
            clock: Arc::new(clock.clone()),
            ..test_context()
        };
        let spec = WorkerSpec::parse_flag("w=http://127.0.0.1:1").unwrap();
        let handle = Arc::new(WorkerHandle::new(WorkerId(1), &spec, &ctx).unwrap());
        let mut core = WorkerCore::new(Arc::clone(&handle));
        let mut config = HealthConfig::default();
        let mut long = handle.start_request();
        long.expect_bytes_within(Duration::from_secs(10));
        clock.advance(Duration::from_secs(9));
        core.on_watch(&config);
        assert!(
            !handle.is_hung(),
            "a long non-streaming answer is allowed its silence"
        );
        let mut stream = handle.start_request();
        stream.expect_bytes_within(Duration::ZERO);
        handle.note_progress();
        handle.publish_latency(figures(2.0, 0.01));
        clock.advance(Duration::from_secs(3));
        core.on_watch(&config);
        assert!(!handle.is_hung(), "twice a 2 s TTFT p90 is the window");
        config.hung.active = false;
        clock.advance(Duration::from_secs(5));
        core.on_watch(&config);
        assert!(!handle.is_hung(), "switched off");
        drop((long, stream));
    }
}
