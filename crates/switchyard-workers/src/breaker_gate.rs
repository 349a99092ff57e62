//! The circuit breaker as the request path uses it: the state machine behind a per-worker
//! mutex, with atomic mirrors so the common case (closed) and routability reads take no lock.

use parking_lot::Mutex;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::Clock;

use crate::breaker::{BreakerParams, BreakerState, Call, CircuitBreaker, Transition};

/// How one call to a worker ended, as the gateway reports it to [`crate::WorkerHandle::record_outcome`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallOutcome {
    /// The worker answered with a status below 500 (4xx included: the client's fault);
    /// `ttfb` is the time to the first response byte, compared with the slow-call bound.
    Success { ttfb: Duration },
    /// Connect error, 5xx, or timeout.
    Failure,
    /// Admitted but ended without saying anything about the worker (client left before the
    /// first byte, or the request was never sent). Returns a half-open trial permit.
    Abandoned,
}

const CLOSED: u8 = 0;
const OPEN: u8 = 1;
const HALF_OPEN: u8 = 2;

pub(crate) struct BreakerGate {
    core: Mutex<CircuitBreaker>,
    clock: Arc<dyn Clock>,
    epoch: Instant,
    state: AtomicU8,
    /// While open: nanoseconds after `epoch` when half-open trials may start.
    open_until: AtomicU64,
    permits_left: AtomicU32,
}

impl fmt::Debug for BreakerGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BreakerGate")
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl BreakerGate {
    pub(crate) fn new(params: BreakerParams, clock: Arc<dyn Clock>) -> Self {
        let epoch = clock.now();
        Self {
            core: Mutex::new(CircuitBreaker::new(params)),
            clock,
            epoch,
            state: AtomicU8::new(CLOSED),
            open_until: AtomicU64::new(0),
            permits_left: AtomicU32::new(0),
        }
    }

    /// The registry's injected clock, which the supervisor's decisions share.
    pub(crate) fn now(&self) -> Instant {
        self.clock.now()
    }

    pub(crate) fn state(&self) -> BreakerState {
        match self.state.load(Ordering::Acquire) {
            OPEN => BreakerState::Open,
            HALF_OPEN => BreakerState::HalfOpen,
            _ => BreakerState::Closed,
        }
    }

    /// Non-consuming: would a call be admitted now? (Routability reads this.)
    pub(crate) fn would_admit(&self) -> bool {
        match self.state.load(Ordering::Acquire) {
            CLOSED => true,
            OPEN => {
                self.nanos_since_epoch(self.clock.now()) >= self.open_until.load(Ordering::Acquire)
            }
            _ => self.permits_left.load(Ordering::Acquire) > 0,
        }
    }

    /// Consuming: admits the call, taking a trial permit in half-open.
    pub(crate) fn admit(&self) -> (bool, Option<Transition>) {
        if self.state.load(Ordering::Acquire) == CLOSED {
            return (true, None);
        }
        let mut core = self.core.lock();
        let result = core.try_acquire(self.clock.now());
        self.mirror(&core);
        result
    }

    /// Also returns the failover time when this call opened a closed breaker
    /// ([`CircuitBreaker::take_failover`]).
    pub(crate) fn record(
        &self,
        outcome: CallOutcome,
    ) -> (Call, Option<Transition>, Option<Duration>) {
        let mut core = self.core.lock();
        let call = match outcome {
            CallOutcome::Success { ttfb } if ttfb > core.slow_call() => Call::Slow,
            CallOutcome::Success { .. } => Call::Success,
            CallOutcome::Failure => Call::Failure,
            CallOutcome::Abandoned => Call::Abandoned,
        };
        let transition = core.record(call, self.clock.now());
        let failover = core.take_failover();
        self.mirror(&core);
        (call, transition, failover)
    }

    /// See [`CircuitBreaker::half_open_early`].
    pub(crate) fn half_open_early(&self) -> Option<Transition> {
        let mut core = self.core.lock();
        let transition = core.half_open_early();
        self.mirror(&core);
        transition
    }

    pub(crate) fn reconfigure(&self, params: BreakerParams) {
        let mut core = self.core.lock();
        core.reconfigure(params);
        self.mirror(&core);
    }

    fn mirror(&self, core: &CircuitBreaker) {
        let until = core
            .open_until()
            .map(|t| self.nanos_since_epoch(t))
            .unwrap_or(0);
        self.open_until.store(until, Ordering::Release);
        self.permits_left
            .store(core.permits_left(), Ordering::Release);
        let state = match core.state() {
            BreakerState::Closed => CLOSED,
            BreakerState::Open => OPEN,
            BreakerState::HalfOpen => HALF_OPEN,
        };
        self.state.store(state, Ordering::Release);
    }

    fn nanos_since_epoch(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::BreakerConfig;
    use switchyard_core::ManualClock;

    fn gate() -> (Arc<BreakerGate>, ManualClock) {
        let clock = ManualClock::new();
        let params = BreakerParams::from_config(&BreakerConfig::default());
        (
            Arc::new(BreakerGate::new(params, Arc::new(clock.clone()))),
            clock,
        )
    }

    #[test]
    fn outcomes_map_to_calls_with_the_slow_bound() {
        let (g, _) = gate();
        let fast = CallOutcome::Success {
            ttfb: Duration::from_secs(3),
        };
        let slow = CallOutcome::Success {
            ttfb: Duration::from_millis(3001),
        };
        assert_eq!(g.record(fast).0, Call::Success);
        assert_eq!(g.record(slow).0, Call::Slow);
        assert_eq!(g.record(CallOutcome::Failure).0, Call::Failure);
    }

    #[test]
    fn routability_view_follows_the_clock_without_consuming_permits() {
        let (g, clock) = gate();
        for _ in 0..30 {
            g.record(CallOutcome::Failure);
        }
        assert_eq!(g.state(), BreakerState::Open);
        assert!(!g.would_admit());
        clock.advance(Duration::from_secs(30));
        assert!(g.would_admit(), "due for half-open");
        for _ in 0..10 {
            assert!(g.would_admit());
        }
        let admitted = (0..10).filter(|_| g.admit().0).count();
        assert_eq!(admitted, 5);
        assert_eq!(g.state(), BreakerState::HalfOpen);
        assert!(!g.would_admit());
    }

    #[test]
    fn concurrent_admissions_in_half_open_hand_out_five_permits() {
        let (g, clock) = gate();
        for _ in 0..30 {
            g.record(CallOutcome::Failure);
        }
        clock.advance(Duration::from_secs(31));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let g = Arc::clone(&g);
                std::thread::spawn(move || (0..100).filter(|_| g.admit().0).count())
            })
            .collect();
        let admitted: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(admitted, 5);
    }
}
