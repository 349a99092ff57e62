//! Degradation controller metrics (`switchyard_degradation_*`). Labels are fixed sets:
//! level (0–3), action (4), result, cause.

use prometheus::{Gauge, IntCounter, IntCounterVec, IntGauge, Registry};

use crate::registrar::Registrar;

pub(crate) struct DegradationMetrics {
    pub(crate) level: IntGauge,
    pub(crate) target_level: IntGauge,
    pub(crate) water_level: Gauge,
    /// from, to, cause (signal, force, release, drill).
    pub(crate) transitions: IntCounterVec,
    /// action, result (ok, failed).
    pub(crate) actions: IntCounterVec,
    /// level.
    pub(crate) level_failures: IntCounterVec,
    pub(crate) water_warnings: IntCounter,
    pub(crate) recovery_held: IntCounter,
    /// kind (force, release).
    pub(crate) overrides: IntCounterVec,
    /// result (passed, failed).
    pub(crate) drills: IntCounterVec,
}

impl DegradationMetrics {
    pub(crate) fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let register = Registrar(registry);
        Ok(Self {
            level: register.int_gauge(
                "switchyard_degradation_level",
                "Degradation level in force (0 normal … 3 survival).",
            )?,
            target_level: register.int_gauge(
                "switchyard_degradation_target_level",
                "Level the signals currently call for.",
            )?,
            water_level: register.gauge(
                "switchyard_degradation_water_level",
                "Budget water level last reported to the controller (0–1).",
            )?,
            transitions: register.counter_vec(
                "switchyard_degradation_transitions_total",
                "Level changes by from, to and cause (signal, force, release, drill; cause_change: the level re-applied because what calls for it changed).",
                &["from", "to", "cause"],
            )?,
            actions: register.counter_vec(
                "switchyard_degradation_actions_total",
                "Degradation actions carried out, by action and result (ok, failed).",
                &["action", "result"],
            )?,
            level_failures: register.counter_vec(
                "switchyard_degradation_level_failures_total",
                "Levels that could not be entered because an action failed (alert).",
                &["level"],
            )?,
            water_warnings: register.counter(
                "switchyard_degradation_water_warnings_total",
                "Times the water level crossed the warn threshold (recorded only).",
            )?,
            recovery_held: register.counter(
                "switchyard_degradation_recovery_held_total",
                "Evaluations that could recover but waited for the one-step-per-interval rule.",
            )?,
            overrides: register.counter_vec(
                "switchyard_degradation_overrides_total",
                "Operator overrides by kind (force, release).",
                &["kind"],
            )?,
            drills: register.counter_vec(
                "switchyard_degradation_drills_total",
                "Drills run, by result (passed, failed).",
                &["result"],
            )?,
        })
    }
}
