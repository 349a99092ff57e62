//! An adaptive concurrency limit, in the style of Envoy's adaptive concurrency filter: the
//! dispatch limit follows the gradient between the workers' latency without load and their
//! latency now. Below the workers' throughput knee latency stays at its no-load value and the
//! limit grows; past the knee requests queue inside the workers, latency rises with every
//! extra request and the limit shrinks. It settles a little past the knee (the tolerance
//! plus √limit of headroom), so the workers stay busy without queueing much.
//!
//! The no-load latency is measured, not assumed: at start and then periodically the limit is
//! pinned to `min_limit` until enough requests dispatched under the pin finished, and their
//! median is taken.
//!
//! Latency is a noisy signal (a busy host, one slow request in a small window), and a limit
//! cut below the knee costs throughput while one a little past it costs only some queueing
//! inside the workers. So cuts are damped (half the step at a time), and no cut goes below
//! the concurrency that carried the best recent throughput at no-load latency (Little's law:
//! best completions per second × no-load latency; see [`window::RateMemory`]): a latency
//! spike that did not cost throughput cannot take the limit under the knee, while workers
//! that really lost capacity pull it down once their better past has left the memory.

mod window;

use std::time::{Duration, Instant};

use crate::config::AdaptiveConfig;
use window::{RateMemory, Window, median};

/// Bounds of one update's multiplier: halve at most, double at most.
const GRADIENT_MIN: f64 = 0.5;
const GRADIENT_MAX: f64 = 2.0;
/// Finished requests a tracking window needs before it moves the limit.
const WINDOW_MIN_SAMPLES: usize = 5;
/// Share of a downward step taken per update.
const CUT_DAMPING: f64 = 0.5;

/// What one finished request made the limit do; one counter each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Pinned to `min_limit` to measure the no-load latency again.
    ProbeStarted,
    /// The no-load latency was measured; the limit is back where it was.
    ProbeMeasured,
    /// Latency at or near no-load: the limit grew.
    Grew,
    /// Latency past the tolerance: the limit was cut (damped).
    Shrank,
    /// A cut stopped at the concurrency that carried the best recent throughput.
    HeldAtFloor,
    /// Latency said grow, but demand never filled half the limit: unchanged.
    HeldIdle,
}

impl Decision {
    pub(crate) const ALL: [Decision; 6] = [
        Decision::ProbeStarted,
        Decision::ProbeMeasured,
        Decision::Grew,
        Decision::Shrank,
        Decision::HeldAtFloor,
        Decision::HeldIdle,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Decision::ProbeStarted => "probe_started",
            Decision::ProbeMeasured => "probe_measured",
            Decision::Grew => "grew",
            Decision::Shrank => "shrank",
            Decision::HeldAtFloor => "held_at_floor",
            Decision::HeldIdle => "held_idle",
        }
    }
}

enum Phase {
    /// Limit pinned to `min_limit` since `pinned_at` (`None`: from the start, when nothing
    /// was in flight); samples at that concurrency, then back to `resume`.
    Probing {
        samples: Vec<Duration>,
        resume: f64,
        pinned_at: Option<Instant>,
    },
    Tracking {
        next_probe: Instant,
    },
}

pub(crate) struct AdaptiveLimit {
    min_limit: f64,
    max_limit: f64,
    interval: Duration,
    tolerance: f64,
    probe_every: Duration,
    probe_samples: usize,
    limit: f64,
    min_rtt: Option<Duration>,
    phase: Phase,
    window: Window,
    rates: RateMemory,
}

impl AdaptiveLimit {
    /// `max_limit` is `max_concurrent`: the adaptive limit only ever lowers it.
    pub(crate) fn new(config: &AdaptiveConfig, max_limit: u32) -> Self {
        let min_limit = f64::from(config.min_limit.min(max_limit).max(1));
        Self {
            min_limit,
            max_limit: f64::from(max_limit.max(1)),
            interval: Duration::from_millis(config.update_interval_ms),
            tolerance: config.rtt_tolerance,
            probe_every: Duration::from_millis(config.min_rtt_interval_ms),
            probe_samples: config.min_rtt_samples.max(1) as usize,
            limit: min_limit,
            min_rtt: None,
            phase: Phase::Probing {
                samples: Vec::new(),
                resume: min_limit,
                pinned_at: None,
            },
            window: Window::default(),
            rates: RateMemory::default(),
        }
    }

    /// Dispatch slots allowed now.
    pub(crate) fn limit(&self) -> usize {
        match self.phase {
            Phase::Probing { .. } => self.min_limit as usize,
            Phase::Tracking { .. } => self.limit.round() as usize,
        }
    }

    /// The no-load latency last measured.
    pub(crate) fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// A request held its slot for `rtt`; `in_flight` requests (itself included) were
    /// dispatched when it finished. Returns what the limit did, if anything.
    pub(crate) fn record(
        &mut self,
        rtt: Duration,
        in_flight: usize,
        now: Instant,
    ) -> Option<Decision> {
        match &mut self.phase {
            Phase::Probing {
                samples,
                resume,
                pinned_at,
            } => {
                // Requests dispatched before the pin took hold queued behind more work than
                // the pin allows: they are not no-load samples.
                let dispatched = now.checked_sub(rtt);
                let under_pin = match (*pinned_at, dispatched) {
                    (None, _) => true,
                    (Some(pinned), Some(dispatched)) => dispatched >= pinned,
                    (Some(_), None) => false,
                };
                if in_flight as f64 > self.min_limit || !under_pin {
                    return None;
                }
                samples.push(rtt);
                if samples.len() < self.probe_samples {
                    return None;
                }
                self.min_rtt = median(samples);
                self.limit = *resume;
                self.phase = Phase::Tracking {
                    next_probe: now + self.probe_every,
                };
                self.window.restart(now);
                Some(Decision::ProbeMeasured)
            }
            Phase::Tracking { next_probe } => {
                if now >= *next_probe {
                    self.phase = Phase::Probing {
                        samples: Vec::new(),
                        resume: self.limit,
                        pinned_at: Some(now),
                    };
                    return Some(Decision::ProbeStarted);
                }
                self.window.push(rtt, in_flight, now);
                // A window spans at least two no-load latencies, so most of what finishes
                // in it was dispatched under the current limit.
                let span = self.interval.max(self.min_rtt.unwrap_or_default() * 2);
                if self.window.span(now) < span || self.window.len() < WINDOW_MIN_SAMPLES {
                    return None;
                }
                let decision = self.update(now);
                self.window.restart(now);
                decision
            }
        }
    }

    fn update(&mut self, now: Instant) -> Option<Decision> {
        let min_rtt = self.min_rtt?;
        if let Some(rate) = self.window.rate(now) {
            self.rates.push(rate);
        }
        let sample = self.window.median_rtt()?;
        if sample.is_zero() {
            return None;
        }
        let target = min_rtt.as_secs_f64() * (1.0 + self.tolerance);
        let gradient = (target / sample.as_secs_f64()).clamp(GRADIENT_MIN, GRADIENT_MAX);
        // Growing on latency that never met the limit would only learn that idle workers
        // are fast: wait until demand fills at least half the limit.
        if gradient >= 1.0 && (self.window.peak_in_flight() as f64) < self.limit / 2.0 {
            return Some(Decision::HeldIdle);
        }
        let stepped = gradient * self.limit + self.limit.sqrt();
        let (next, decision) = if stepped >= self.limit {
            (stepped, Decision::Grew)
        } else {
            let damped = self.limit + CUT_DAMPING * (stepped - self.limit);
            let floor = self.rates.peak() * min_rtt.as_secs_f64();
            if floor > damped {
                (floor.min(self.limit), Decision::HeldAtFloor)
            } else {
                (damped, Decision::Shrank)
            }
        };
        self.limit = next.clamp(self.min_limit, self.max_limit);
        Some(decision)
    }
}

#[cfg(test)]
mod tests;
