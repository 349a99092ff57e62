//! `GET /admin/admission`: the state of every queue, gate and the overload machine.

use serde::Serialize;
use switchyard_core::QuotaScope;

use crate::gates::callers::ScopeGates;
use crate::overload::{GatewayState, OverloadSignals};
use crate::shared::Inner;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AdmissionSnapshot {
    pub state: GatewayState,
    pub state_for_secs: f64,
    /// Share of `max_concurrent` the recovery ramp admits now.
    pub capacity_ratio: f64,
    /// Share of `max_concurrent` graded degradation allows (1.0 when undegraded).
    pub degradation_ratio: f64,
    /// Ramp level index and its time so far, while recovering.
    pub ramp_level: Option<usize>,
    pub ramp_level_for_secs: Option<f64>,
    pub max_concurrent: u32,
    pub dispatch_capacity: usize,
    pub in_flight: usize,
    pub in_flight_by_class: PerClassCounts,
    pub queued: PerClassCounts,
    /// Mean time a dispatch slot is held (what queue waits and `Retry-After` are
    /// estimated from), once known.
    pub service_time_ms: Option<f64>,
    /// The adaptive concurrency limit and the no-load latency it measured, when it is on.
    pub adaptive_limit: Option<usize>,
    pub adaptive_min_rtt_ms: Option<f64>,
    pub p2_paused: bool,
    pub signals: OverloadSignals,
    /// True when no tenant is configured (everyone is `anonymous`).
    pub anonymous: bool,
    /// Every configured caller and caller purpose, sorted by scope.
    pub scopes: Vec<ScopeSnapshot>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PerClassCounts {
    pub p0: usize,
    pub p1: usize,
    pub p2: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScopeSnapshot {
    /// `caller` or `caller/purpose`.
    pub scope: String,
    pub in_flight: Option<u32>,
    pub max_in_flight: Option<u32>,
    pub bucket_tokens: Option<f64>,
    pub bucket_capacity: Option<f64>,
    /// Used share of the period budget, reservations included.
    pub budget_water_level: Option<f64>,
    /// Refusals in a row (caller scopes only).
    pub consecutive_refusals: Option<u32>,
}

pub(crate) fn take(inner: &Inner) -> AdmissionSnapshot {
    let now = inner.clock.now();
    let (state, since, ratio, (level, level_since), signals) = {
        let mut detector = inner.detector.lock();
        let events = detector.evaluate(now);
        inner.apply(&events, &detector);
        (
            detector.state(),
            detector.since(),
            detector.capacity_ratio(),
            detector.ramp_level(),
            detector.signals(now),
        )
    };
    let recovering = state == GatewayState::Recovering;
    let dispatch = inner.dispatcher.stats();
    let mut scopes = Vec::new();
    for (_, caller) in inner.gates.callers.configured() {
        let mut entry = scope_snapshot(inner, &caller.caller, now);
        entry.consecutive_refusals = Some(caller.consecutive_refusals());
        scopes.push(entry);
        for purpose in caller.purposes.values() {
            scopes.push(scope_snapshot(inner, purpose, now));
        }
    }
    scopes.sort_by(|a, b| a.scope.cmp(&b.scope));
    AdmissionSnapshot {
        state,
        state_for_secs: now.saturating_duration_since(since).as_secs_f64(),
        capacity_ratio: ratio,
        degradation_ratio: inner.degradation_ratio(),
        ramp_level: recovering.then_some(level),
        ramp_level_for_secs: recovering
            .then(|| now.saturating_duration_since(level_since).as_secs_f64()),
        max_concurrent: inner.config.max_concurrent,
        dispatch_capacity: dispatch.capacity,
        in_flight: dispatch.in_use,
        in_flight_by_class: PerClassCounts {
            p0: dispatch.in_use_by_class[0],
            p1: dispatch.in_use_by_class[1],
            p2: dispatch.in_use_by_class[2],
        },
        service_time_ms: dispatch.service_time.map(|d| d.as_secs_f64() * 1e3),
        adaptive_limit: dispatch.adaptive_limit,
        adaptive_min_rtt_ms: dispatch.adaptive_min_rtt.map(|d| d.as_secs_f64() * 1e3),
        queued: PerClassCounts {
            p0: dispatch.queued[0],
            p1: dispatch.queued[1],
            p2: dispatch.queued[2],
        },
        p2_paused: dispatch.p2_paused,
        signals,
        anonymous: inner.identity.is_anonymous(),
        scopes,
    }
}

fn scope_snapshot(inner: &Inner, gates: &ScopeGates, now: std::time::Instant) -> ScopeSnapshot {
    let (bucket_tokens, bucket_capacity) = match &gates.bucket {
        Some(bucket) => {
            let mut bucket = bucket.lock();
            (Some(bucket.level(now)), Some(bucket.capacity()))
        }
        None => (None, None),
    };
    let scope: &QuotaScope = &gates.scope;
    ScopeSnapshot {
        scope: scope.to_string(),
        in_flight: gates.in_flight_now(),
        max_in_flight: gates.max_in_flight,
        bucket_tokens,
        bucket_capacity,
        budget_water_level: inner.gates.ledger.water_level(scope),
        consecutive_refusals: None,
    }
}
