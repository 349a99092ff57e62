//! Circuit breaker with Resilience4j semantics, as a pure state machine: the
//! caller passes the time in.
//!
//! Closed: a count-based sliding window of the last `window_size` calls; once it holds at
//! least `minimum_calls`, a failure rate or slow-call rate at or above its threshold opens
//! the breaker. Open: rejects everything for `open_for`, then the next admission attempt
//! moves it to half-open. Half-open: hands out `half_open_permits` trial permits; when that
//! many trial outcomes are in, the same thresholds decide between closed and open again.

use serde::Serialize;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use crate::config::{BreakerConfig, ms};

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BreakerParams {
    pub window_size: usize,
    pub minimum_calls: usize,
    pub failure_rate: f64,
    pub slow_rate: f64,
    pub slow_call: Duration,
    pub open_for: Duration,
    pub half_open_permits: u32,
}

impl BreakerParams {
    pub(crate) fn from_config(c: &BreakerConfig) -> Self {
        Self {
            window_size: c.window_size as usize,
            minimum_calls: c.minimum_calls as usize,
            failure_rate: c.failure_rate_threshold,
            slow_rate: c.slow_call_rate_threshold,
            slow_call: ms(c.slow_call_ms),
            open_for: ms(c.open_ms),
            half_open_permits: c.half_open_permits,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::Open => "open",
            BreakerState::HalfOpen => "half_open",
        }
    }
}

/// A finished call as the breaker counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    Success,
    /// Succeeded, but slower than `slow_call` to first byte.
    Slow,
    Failure,
    /// Admitted but never completed (client left, not sent): returns a half-open permit.
    Abandoned,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transition {
    Opened,
    HalfOpened,
    Closed,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    calls: usize,
    failures: usize,
    slow: usize,
}

impl Tally {
    fn add(&mut self, call: Call) {
        self.calls += 1;
        self.failures += usize::from(call == Call::Failure);
        self.slow += usize::from(call == Call::Slow);
    }

    fn remove(&mut self, call: Call) {
        self.calls -= 1;
        self.failures -= usize::from(call == Call::Failure);
        self.slow -= usize::from(call == Call::Slow);
    }

    fn trips(&self, p: &BreakerParams) -> bool {
        let calls = self.calls as f64;
        self.failures as f64 / calls >= p.failure_rate || self.slow as f64 / calls >= p.slow_rate
    }
}

#[derive(Clone, Debug)]
pub(crate) struct CircuitBreaker {
    params: BreakerParams,
    state: BreakerState,
    window: VecDeque<Call>,
    tally: Tally,
    opened_at: Option<Instant>,
    permits_issued: u32,
    trial: Tally,
    /// Closed: when the oldest failed or slow call still in the window arrived, i.e. when
    /// this failing episode began (approximated by the first bad call since the window was
    /// last clean).
    failing_since: Option<Instant>,
    /// Set when closed -> open: how long the episode took to take the worker out.
    failover: Option<Duration>,
}

impl CircuitBreaker {
    pub(crate) fn new(params: BreakerParams) -> Self {
        Self {
            params,
            state: BreakerState::Closed,
            window: VecDeque::with_capacity(params.window_size),
            tally: Tally::default(),
            opened_at: None,
            permits_issued: 0,
            trial: Tally::default(),
            failing_since: None,
            failover: None,
        }
    }

    /// The time from the first bad call of the episode to the last closed -> open
    /// transition; `None` if the breaker has not opened from closed since the last call.
    pub(crate) fn take_failover(&mut self) -> Option<Duration> {
        self.failover.take()
    }

    pub(crate) fn state(&self) -> BreakerState {
        self.state
    }

    pub(crate) fn slow_call(&self) -> Duration {
        self.params.slow_call
    }

    /// When an open breaker becomes eligible for half-open.
    pub(crate) fn open_until(&self) -> Option<Instant> {
        match self.state {
            BreakerState::Open => self.opened_at.map(|t| t + self.params.open_for),
            _ => None,
        }
    }

    pub(crate) fn permits_left(&self) -> u32 {
        match self.state {
            BreakerState::HalfOpen => self
                .params
                .half_open_permits
                .saturating_sub(self.permits_issued),
            _ => 0,
        }
    }

    /// Whether a call may go to the worker now; in half-open, takes one trial permit.
    pub(crate) fn try_acquire(&mut self, now: Instant) -> (bool, Option<Transition>) {
        let mut transition = None;
        if self.open_until().is_some_and(|until| now >= until) {
            self.enter_half_open();
            transition = Some(Transition::HalfOpened);
        }
        let admitted = match self.state {
            BreakerState::Closed => true,
            BreakerState::Open => false,
            BreakerState::HalfOpen => {
                let ok = self.permits_issued < self.params.half_open_permits;
                self.permits_issued += u32::from(ok);
                ok
            }
        };
        (admitted, transition)
    }

    pub(crate) fn record(&mut self, call: Call, now: Instant) -> Option<Transition> {
        match self.state {
            // Calls admitted before the breaker opened finish later; they change nothing.
            BreakerState::Open => None,
            BreakerState::Closed => {
                if call == Call::Abandoned {
                    return None;
                }
                if self.window.len() >= self.params.window_size
                    && let Some(oldest) = self.window.pop_front()
                {
                    self.tally.remove(oldest);
                }
                self.window.push_back(call);
                self.tally.add(call);
                if self.tally.failures + self.tally.slow == 0 {
                    self.failing_since = None;
                } else if self.failing_since.is_none() {
                    self.failing_since = Some(now);
                }
                if self.tally.calls >= self.params.minimum_calls && self.tally.trips(&self.params) {
                    self.failover = self
                        .failing_since
                        .map(|since| now.saturating_duration_since(since));
                    self.enter_open(now);
                    return Some(Transition::Opened);
                }
                None
            }
            BreakerState::HalfOpen => {
                if call == Call::Abandoned {
                    self.permits_issued = self.permits_issued.saturating_sub(1);
                    return None;
                }
                self.trial.add(call);
                if self.trial.calls < self.params.half_open_permits as usize {
                    return None;
                }
                if self.trial.trips(&self.params) {
                    self.enter_open(now);
                    Some(Transition::Opened)
                } else {
                    self.enter_closed();
                    Some(Transition::Closed)
                }
            }
        }
    }

    /// Open → half-open before the open period ends, when something outside the call path
    /// (the active health check) has seen the worker come back; the trial calls decide.
    pub(crate) fn half_open_early(&mut self) -> Option<Transition> {
        if self.state != BreakerState::Open {
            return None;
        }
        self.enter_half_open();
        Some(Transition::HalfOpened)
    }

    /// New parameters from a config reload; the window keeps its newest calls.
    pub(crate) fn reconfigure(&mut self, params: BreakerParams) {
        self.params = params;
        while self.window.len() > params.window_size {
            if let Some(oldest) = self.window.pop_front() {
                self.tally.remove(oldest);
            }
        }
    }

    fn enter_open(&mut self, now: Instant) {
        self.state = BreakerState::Open;
        self.opened_at = Some(now);
        self.failing_since = None;
        self.window.clear();
        self.tally = Tally::default();
    }

    fn enter_half_open(&mut self) {
        self.state = BreakerState::HalfOpen;
        self.permits_issued = 0;
        self.trial = Tally::default();
    }

    fn enter_closed(&mut self) {
        self.state = BreakerState::Closed;
        self.opened_at = None;
        self.failing_since = None;
        self.window.clear();
        self.tally = Tally::default();
    }
}

#[cfg(test)]
#[path = "breaker_tests.rs"]
mod tests;
