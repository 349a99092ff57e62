//! An adaptive concurrency limit, in the style of Envoy's adaptive concurrency filter: the
//! dispatch limit follows the gradient between the workers' latency without load and their
//! latency now. Below the workers' throughput knee latency stays at its no-load value and the
//! limit grows; past the knee requests queue inside the workers, latency rises with every
//! extra request and the limit shrinks. It settles a little past the knee (the tolerance
//! plus √limit of headroom), so the workers stay busy without queueing much.
//!
//! The no-load latency is measured, not assumed: at start and then periodically the limit is
//! pinned to `min_limit` until enough requests finished at that concurrency, and their
//! median is taken.

use std::time::{Duration, Instant};

use crate::config::AdaptiveConfig;

/// Bounds of one update's multiplier: halve at most, double at most.
const GRADIENT_MIN: f64 = 0.5;
const GRADIENT_MAX: f64 = 2.0;
/// Finished requests a tracking window needs before it moves the limit.
const WINDOW_MIN_SAMPLES: usize = 5;

enum Phase {
    /// Limit pinned to `min_limit`; samples at that concurrency, then back to `resume`.
    Probing {
        samples: Vec<Duration>,
        resume: f64,
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
    window: Vec<Duration>,
    window_start: Option<Instant>,
    peak_in_flight: usize,
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
            },
            window: Vec::new(),
            window_start: None,
            peak_in_flight: 0,
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
    /// dispatched when it finished.
    pub(crate) fn record(&mut self, rtt: Duration, in_flight: usize, now: Instant) {
        match &mut self.phase {
            Phase::Probing { samples, resume } => {
                // Requests dispatched before the pin took hold are not no-load samples.
                if in_flight as f64 > self.min_limit {
                    return;
                }
                samples.push(rtt);
                if samples.len() >= self.probe_samples {
                    self.min_rtt = median(samples);
                    self.limit = *resume;
                    self.phase = Phase::Tracking {
                        next_probe: now + self.probe_every,
                    };
                    self.reset_window();
                }
            }
            Phase::Tracking { next_probe } => {
                if now >= *next_probe {
                    self.phase = Phase::Probing {
                        samples: Vec::new(),
                        resume: self.limit,
                    };
                    return;
                }
                let start = *self.window_start.get_or_insert(now);
                self.window.push(rtt);
                self.peak_in_flight = self.peak_in_flight.max(in_flight);
                // A window spans at least two no-load latencies, so most of what finishes
                // in it was dispatched under the current limit.
                let span = self.interval.max(self.min_rtt.unwrap_or_default() * 2);
                if now.saturating_duration_since(start) >= span
                    && self.window.len() >= WINDOW_MIN_SAMPLES
                {
                    self.update();
                    self.reset_window();
                }
            }
        }
    }

    fn update(&mut self) {
        let (Some(min_rtt), Some(sample)) = (self.min_rtt, median(&mut self.window)) else {
            return;
        };
        if sample.is_zero() {
            return;
        }
        let target = min_rtt.as_secs_f64() * (1.0 + self.tolerance);
        let gradient = (target / sample.as_secs_f64()).clamp(GRADIENT_MIN, GRADIENT_MAX);
        // Growing on latency that never met the limit would only learn that idle workers
        // are fast: wait until demand fills at least half the limit.
        if gradient >= 1.0 && (self.peak_in_flight as f64) < self.limit / 2.0 {
            return;
        }
        let next = gradient * self.limit + self.limit.sqrt();
        self.limit = next.clamp(self.min_limit, self.max_limit);
    }

    fn reset_window(&mut self) {
        self.window.clear();
        self.window_start = None;
        self.peak_in_flight = 0;
    }
}

fn median(samples: &mut [Duration]) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    Some(samples[samples.len() / 2])
}

#[cfg(test)]
mod tests;
