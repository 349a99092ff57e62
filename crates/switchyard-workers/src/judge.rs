//! The hysteresis judge: easy to enter, hard to leave (so a worker near the threshold does
//! not flap in and out of routing).
//!
//! Not overloaded -> overloaded when TTFT p90 >= the overload threshold OR TPOT p90 >= its
//! threshold. Overloaded -> recovered only when a window with enough samples shows TTFT p90
//! and TPOT p90 below the (lower) recovery thresholds AND the prober's last N probes
//! succeeded ("double confirmation"). M consecutive probe failures re-arm the mark: all
//! recovery progress is forgotten. A pure state machine: no clock, no I/O.

use crate::config::HealthConfig;
use crate::latency::LatencyFigures;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct JudgeThresholds {
    pub active: bool,
    pub overload_ttft: f64,
    pub overload_tpot: f64,
    pub recover_ttft: f64,
    pub recover_tpot: f64,
    pub min_samples: u64,
    pub successes_to_confirm: u32,
    pub failures_to_rearm: u32,
}

impl JudgeThresholds {
    pub(crate) fn from_config(config: &HealthConfig) -> Self {
        let l = &config.latency_aware;
        let secs = |ms: u64| ms as f64 / 1000.0;
        Self {
            active: l.active,
            overload_ttft: secs(l.overload_ttft_p90_ms),
            overload_tpot: secs(l.overload_tpot_p90_ms),
            recover_ttft: secs(l.recover_ttft_p90_ms),
            recover_tpot: secs(l.recover_tpot_p90_ms),
            min_samples: l.min_samples,
            successes_to_confirm: config.prober.successes_to_confirm,
            failures_to_rearm: config.prober.failures_to_rearm,
        }
    }
}

/// Which figure put the worker over the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OverloadReason {
    Ttft,
    Tpot,
}

/// What one latency window did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowVerdict {
    /// The marker is switched off: no-op (and any mark was cleared).
    Inactive,
    /// Not overloaded and the window holds no samples.
    NoData,
    /// Not overloaded and below the overload thresholds.
    Normal,
    Marked(OverloadReason),
    /// Overloaded, and the window has too few samples to clear anything.
    Sparse,
    /// Overloaded, latency not (yet) below the recovery thresholds.
    Locked,
    /// Overloaded, latency recovered, waiting for the prober.
    AwaitingProbe,
    Recovered,
}

/// What one probe result did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProbeVerdict {
    /// Not overloaded (a late probe result) or the marker is off.
    Ignored,
    Counting,
    /// The last N probes succeeded; latency has not confirmed yet.
    Confirmed,
    Recovered,
    Rearmed,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Recovery {
    latency_ok: bool,
    probe_successes: u32,
    probe_failures: u32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Judge {
    overloaded: Option<Recovery>,
}

impl Judge {
    /// A judge that resumes an existing mark (supervisor restart).
    pub(crate) fn resume(overloaded: bool) -> Self {
        Self {
            overloaded: overloaded.then(Recovery::default),
        }
    }

    pub(crate) fn is_overloaded(&self) -> bool {
        self.overloaded.is_some()
    }

    /// Drops any mark (the marker was switched off).
    pub(crate) fn clear(&mut self) {
        self.overloaded = None;
    }

    pub(crate) fn observe_window(
        &mut self,
        figures: &LatencyFigures,
        t: &JudgeThresholds,
    ) -> WindowVerdict {
        if !t.active {
            self.clear();
            return WindowVerdict::Inactive;
        }
        let ttft = figures.ttft_p90_seconds;
        let tpot = figures.tpot_p90_seconds;
        let Some(recovery) = &mut self.overloaded else {
            if ttft.is_some_and(|v| v >= t.overload_ttft) {
                self.overloaded = Some(Recovery::default());
                return WindowVerdict::Marked(OverloadReason::Ttft);
            }
            if tpot.is_some_and(|v| v >= t.overload_tpot) {
                self.overloaded = Some(Recovery::default());
                return WindowVerdict::Marked(OverloadReason::Tpot);
            }
            if ttft.is_none() && tpot.is_none() {
                return WindowVerdict::NoData;
            }
            return WindowVerdict::Normal;
        };
        if figures.ttft_samples < t.min_samples {
            return WindowVerdict::Sparse;
        }
        // A window without TPOT samples (one-token answers) says nothing against TPOT.
        let latency_ok =
            ttft.is_some_and(|v| v < t.recover_ttft) && tpot.is_none_or(|v| v < t.recover_tpot);
        recovery.latency_ok = latency_ok;
        if !latency_ok {
            return WindowVerdict::Locked;
        }
        if recovery.probe_successes >= t.successes_to_confirm {
            self.overloaded = None;
            return WindowVerdict::Recovered;
        }
        WindowVerdict::AwaitingProbe
    }

    pub(crate) fn observe_probe(&mut self, success: bool, t: &JudgeThresholds) -> ProbeVerdict {
        if !t.active {
            self.clear();
            return ProbeVerdict::Ignored;
        }
        let Some(recovery) = &mut self.overloaded else {
            return ProbeVerdict::Ignored;
        };
        if success {
            recovery.probe_failures = 0;
            recovery.probe_successes = recovery.probe_successes.saturating_add(1);
            if recovery.probe_successes < t.successes_to_confirm {
                return ProbeVerdict::Counting;
            }
            if recovery.latency_ok {
                self.overloaded = None;
                return ProbeVerdict::Recovered;
            }
            return ProbeVerdict::Confirmed;
        }
        recovery.probe_successes = 0;
        recovery.probe_failures += 1;
        if recovery.probe_failures >= t.failures_to_rearm {
            *recovery = Recovery::default();
            return ProbeVerdict::Rearmed;
        }
        ProbeVerdict::Counting
    }
}

#[cfg(test)]
#[path = "judge_tests.rs"]
mod tests;
