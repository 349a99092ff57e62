//! A worker's published condition: the flags the request path reads (atomics), the counters
//! operators read, and the snapshot served at `GET /admin/workers`.

use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use switchyard_core::WorkerId;

use crate::breaker::BreakerState;
use crate::latency::LatencyFigures;

/// Why a worker changed state; a bounded label set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TransitionReason {
    Unhealthy,
    Healthy,
    OverloadedTtft,
    OverloadedTpot,
    Recovered,
    Rearmed,
    ClearedInactive,
    Draining,
    CircuitOpen,
    CircuitHalfOpen,
    CircuitClosed,
    Hung,
    /// Hung because its streams are stuck mid-answer while it completes nothing.
    HungStalledStreams,
    HungRecovered,
}

impl TransitionReason {
    pub(crate) const ALL: [TransitionReason; 14] = [
        Self::Unhealthy,
        Self::Healthy,
        Self::OverloadedTtft,
        Self::OverloadedTpot,
        Self::Recovered,
        Self::Rearmed,
        Self::ClearedInactive,
        Self::Draining,
        Self::CircuitOpen,
        Self::CircuitHalfOpen,
        Self::CircuitClosed,
        Self::Hung,
        Self::HungStalledStreams,
        Self::HungRecovered,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Unhealthy => "unhealthy",
            Self::Healthy => "healthy",
            Self::OverloadedTtft => "overloaded_ttft",
            Self::OverloadedTpot => "overloaded_tpot",
            Self::Recovered => "recovered",
            Self::Rearmed => "rearmed",
            Self::ClearedInactive => "cleared_inactive",
            Self::Draining => "draining",
            Self::CircuitOpen => "circuit_open",
            Self::CircuitHalfOpen => "circuit_half_open",
            Self::CircuitClosed => "circuit_closed",
            Self::Hung => "hung",
            Self::HungStalledStreams => "hung_stalled_streams",
            Self::HungRecovered => "hung_recovered",
        }
    }
}

/// Whether the prefilter may hand this worker to the routing policy, or the FIRST reason it
/// is filtered, checked in this order: draining, unhealthy, circuit open, hung, overloaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Routability {
    Routable,
    Draining,
    Unhealthy,
    CircuitOpen,
    /// Busy and silent while `/health` says 200; cleared by the prober.
    Hung,
    /// Latency-overloaded; only reported while `latency_aware.active` is on.
    Overloaded,
}

impl Routability {
    pub fn is_routable(self) -> bool {
        self == Routability::Routable
    }

    /// Bounded label for metrics (`routable`, `draining`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Routability::Routable => "routable",
            Routability::Draining => "draining",
            Routability::Unhealthy => "unhealthy",
            Routability::CircuitOpen => "circuit_open",
            Routability::Hung => "hung",
            Routability::Overloaded => "overloaded",
        }
    }
}

/// The one-word state operators see; `healthy` means routable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    Healthy,
    Unhealthy,
    Overloaded,
    Draining,
    CircuitOpen,
    Hung,
}

impl From<Routability> for WorkerState {
    fn from(r: Routability) -> Self {
        match r {
            Routability::Routable => WorkerState::Healthy,
            Routability::Draining => WorkerState::Draining,
            Routability::Unhealthy => WorkerState::Unhealthy,
            Routability::CircuitOpen => WorkerState::CircuitOpen,
            Routability::Hung => WorkerState::Hung,
            Routability::Overloaded => WorkerState::Overloaded,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatusCounters {
    pub health_check_successes: u64,
    pub health_check_failures: u64,
    pub probe_successes: u64,
    pub probe_failures: u64,
    pub transitions: u64,
}

/// Everything `GET /admin/workers` shows about one worker.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerStatus {
    pub name: String,
    pub id: WorkerId,
    pub url: String,
    pub models: Option<Vec<String>>,
    pub state: WorkerState,
    pub routability: Routability,
    pub healthy: bool,
    pub overloaded: bool,
    pub hung: bool,
    pub draining: bool,
    pub breaker: BreakerState,
    pub in_flight: u64,
    /// The collector's latest window (p90s and their source), if any yet.
    pub latency: Option<LatencyFigures>,
    pub last_transition: Option<&'static str>,
    pub counters: StatusCounters,
    /// The engine its spec names, the context length its `/v1/models` states and the
    /// engine's own load gauges, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine: Option<crate::engine::EngineKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_model_len: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_load: Option<crate::engine::EngineLoad>,
}

const NO_TRANSITION: u8 = u8::MAX;

/// Flags written by the worker's supervisor (and the registry for `draining`), read by
/// every request.
#[derive(Debug)]
pub(crate) struct WorkerFlags {
    pub(crate) healthy: AtomicBool,
    pub(crate) overloaded: AtomicBool,
    pub(crate) hung: AtomicBool,
    pub(crate) draining: AtomicBool,
    pub(crate) health_successes: AtomicU64,
    pub(crate) health_failures: AtomicU64,
    pub(crate) probe_successes: AtomicU64,
    pub(crate) probe_failures: AtomicU64,
    transitions: AtomicU64,
    last_transition: AtomicU8,
}

impl Default for WorkerFlags {
    fn default() -> Self {
        Self {
            healthy: AtomicBool::new(true),
            overloaded: AtomicBool::new(false),
            hung: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            health_successes: AtomicU64::new(0),
            health_failures: AtomicU64::new(0),
            probe_successes: AtomicU64::new(0),
            probe_failures: AtomicU64::new(0),
            transitions: AtomicU64::new(0),
            last_transition: AtomicU8::new(NO_TRANSITION),
        }
    }
}

impl WorkerFlags {
    pub(crate) fn note_transition(&self, reason: TransitionReason) {
        self.transitions.fetch_add(1, Ordering::Relaxed);
        let index = TransitionReason::ALL
            .iter()
            .position(|r| *r == reason)
            .unwrap_or(usize::from(NO_TRANSITION));
        self.last_transition.store(
            u8::try_from(index).unwrap_or(NO_TRANSITION),
            Ordering::Relaxed,
        );
    }

    pub(crate) fn last_transition(&self) -> Option<&'static str> {
        let index = usize::from(self.last_transition.load(Ordering::Relaxed));
        TransitionReason::ALL.get(index).map(|r| r.as_str())
    }

    pub(crate) fn counters(&self) -> StatusCounters {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StatusCounters {
            health_check_successes: get(&self.health_successes),
            health_check_failures: get(&self.health_failures),
            probe_successes: get(&self.probe_successes),
            probe_failures: get(&self.probe_failures),
            transitions: get(&self.transitions),
        }
    }
}
