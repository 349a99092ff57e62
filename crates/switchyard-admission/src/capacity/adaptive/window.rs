//! What the adaptive limit measures between two updates (the latencies and completions of one
//! window), and the best completion rate of the last few windows.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Windows the completion-rate memory spans. Each window lasts at least two no-load
/// latencies, so this is some twenty request lifetimes: long enough to outlast a latency
/// spike, short enough to forget workers that really lost capacity.
const RATE_WINDOWS: usize = 10;

/// Requests that finished since `start`: their latencies and the most in flight.
#[derive(Default)]
pub(super) struct Window {
    rtts: Vec<Duration>,
    peak_in_flight: usize,
    start: Option<Instant>,
}

impl Window {
    /// Starts an empty window at `now`; windows are back to back, so every completion
    /// counts towards one rate.
    pub(super) fn restart(&mut self, now: Instant) {
        self.rtts.clear();
        self.peak_in_flight = 0;
        self.start = Some(now);
    }

    pub(super) fn push(&mut self, rtt: Duration, in_flight: usize, now: Instant) {
        self.start.get_or_insert(now);
        self.rtts.push(rtt);
        self.peak_in_flight = self.peak_in_flight.max(in_flight);
    }

    pub(super) fn len(&self) -> usize {
        self.rtts.len()
    }

    pub(super) fn span(&self, now: Instant) -> Duration {
        self.start
            .map_or(Duration::ZERO, |start| now.saturating_duration_since(start))
    }

    pub(super) fn peak_in_flight(&self) -> usize {
        self.peak_in_flight
    }

    /// Completions per second over the window.
    pub(super) fn rate(&self, now: Instant) -> Option<f64> {
        let span = self.span(now).as_secs_f64();
        (span > 0.0).then(|| self.rtts.len() as f64 / span)
    }

    pub(super) fn median_rtt(&mut self) -> Option<Duration> {
        median(&mut self.rtts)
    }
}

/// The completion rates of the last [`RATE_WINDOWS`] windows.
#[derive(Default)]
pub(super) struct RateMemory {
    rates: VecDeque<f64>,
}

impl RateMemory {
    pub(super) fn push(&mut self, rate: f64) {
        if self.rates.len() == RATE_WINDOWS {
            self.rates.pop_front();
        }
        self.rates.push_back(rate);
    }

    /// The best of them (0 before any).
    pub(super) fn peak(&self) -> f64 {
        self.rates.iter().copied().fold(0.0, f64::max)
    }
}

/// The middle sample (the upper one of an even count); sorts `samples` in place.
pub(super) fn median(samples: &mut [Duration]) -> Option<Duration> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_unstable();
    Some(samples[samples.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_counts_completions_since_the_restart_and_the_memory_forgets() {
        let t0 = Instant::now();
        let mut window = Window::default();
        window.restart(t0);
        for i in 1..=10u64 {
            window.push(
                Duration::from_millis(100),
                4,
                t0 + Duration::from_millis(100 * i),
            );
        }
        let rate = window.rate(t0 + Duration::from_secs(1)).unwrap();
        assert!((rate - 10.0).abs() < 1e-9, "{rate}");
        assert_eq!(window.peak_in_flight(), 4);

        let mut memory = RateMemory::default();
        memory.push(30.0);
        for _ in 0..RATE_WINDOWS - 1 {
            memory.push(10.0);
        }
        assert_eq!(memory.peak(), 30.0, "still within the memory");
        memory.push(12.0);
        assert_eq!(memory.peak(), 12.0, "the best window aged out");
    }
}
