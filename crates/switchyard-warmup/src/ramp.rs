//! The warmup ramp: a wave of warmups climbs its concurrency step by step
//! (5 → 15 → 35 → 60 → 100 % over windows of 30/30/45/60/60 s). At the end of each window:
//! error rate < 1 % and p95 < 2 × steady → advance; error rate > 3 % → back off one step and
//! hold it for an extra window; anything between → hold. Two backoffs without a clean window
//! between them abort the wave. Every step runs at least one instance's minimum warm load.

use serde::Serialize;

use crate::clock::{UnixMillis, secs_to_ms};
use crate::config::WarmupRampConfig;

/// Latency samples kept per window at most; beyond it the window is judged on these.
const MAX_SAMPLES: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RampMove {
    /// The window is still running.
    Wait,
    /// The window was inconclusive (or empty): stay at this step for another window.
    Hold,
    Advance {
        to: usize,
    },
    /// Stepped back to `to`, which is held for two windows.
    Backoff {
        to: usize,
    },
    /// Too many backoffs in a row: stop the wave and alert.
    Abort,
}

impl RampMove {
    pub fn label(self) -> &'static str {
        match self {
            Self::Wait => "wait",
            Self::Hold => "hold",
            Self::Advance { .. } => "advance",
            Self::Backoff { .. } => "backoff",
            Self::Abort => "abort",
        }
    }
}

/// What the last window looked like, for logs and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct WindowStats {
    pub finished: u64,
    pub failed: u64,
    pub p95_ms: Option<u64>,
}

impl WindowStats {
    pub fn error_rate(&self) -> Option<f64> {
        (self.finished > 0).then(|| self.failed as f64 / self.finished as f64)
    }
}

#[derive(Clone, Debug)]
pub struct Ramp {
    config: WarmupRampConfig,
    steady_p95_ms: u64,
    step: usize,
    window_start: UnixMillis,
    window_ms: u64,
    consecutive_backoffs: u32,
    finished: u64,
    failed: u64,
    latencies_ms: Vec<u64>,
}

impl Ramp {
    pub fn new(config: &WarmupRampConfig, now: UnixMillis) -> Self {
        let mut ramp = Self {
            config: config.clone(),
            steady_p95_ms: config.steady_p95_ms,
            step: 0,
            window_start: now,
            window_ms: 0,
            consecutive_backoffs: 0,
            finished: 0,
            failed: 0,
            latencies_ms: Vec::new(),
        };
        ramp.begin_window(now, 1);
        ramp
    }

    pub fn step(&self) -> usize {
        self.step
    }

    /// Warmups allowed to run at once at the current step.
    pub fn concurrency(&self) -> u32 {
        let share = self.config.steps.get(self.step).copied().unwrap_or(1.0);
        let scaled = (f64::from(self.config.target_concurrency) * share).ceil() as u32;
        scaled.max(self.config.min_warm_load).max(1)
    }

    /// The steady-state p95 the wave's latency is compared with (reported by the gateway).
    pub fn set_steady_p95_ms(&mut self, p95_ms: u64) {
        if p95_ms > 0 {
            self.steady_p95_ms = p95_ms;
        }
    }

    pub fn record(&mut self, ok: bool, latency_ms: u64) {
        self.finished += 1;
        self.failed += u64::from(!ok);
        if self.latencies_ms.len() < MAX_SAMPLES {
            self.latencies_ms.push(latency_ms);
        }
    }

    pub fn window_stats(&self) -> WindowStats {
        WindowStats {
            finished: self.finished,
            failed: self.failed,
            p95_ms: p95(&self.latencies_ms),
        }
    }

    /// Judges the current window once it has run its length.
    pub fn evaluate(&mut self, now: UnixMillis) -> RampMove {
        if now.saturating_sub(self.window_start) < self.window_ms {
            return RampMove::Wait;
        }
        let stats = self.window_stats();
        let Some(error_rate) = stats.error_rate() else {
            // Nothing finished (cold starts can outlast a window): judge the next one.
            self.begin_window(now, 1);
            return RampMove::Hold;
        };
        if error_rate > self.config.backoff_error_rate {
            self.consecutive_backoffs += 1;
            if self.consecutive_backoffs >= self.config.max_consecutive_backoffs {
                return RampMove::Abort;
            }
            self.step = self.step.saturating_sub(1);
            self.begin_window(now, 2);
            return RampMove::Backoff { to: self.step };
        }
        let p95_ok = stats.p95_ms.is_some_and(|p95| {
            (p95 as f64) < self.config.advance_max_p95_ratio * self.steady_p95_ms as f64
        });
        if error_rate < self.config.advance_max_error_rate && p95_ok {
            self.consecutive_backoffs = 0;
            if self.step + 1 < self.config.steps.len() {
                self.step += 1;
                self.begin_window(now, 1);
                return RampMove::Advance { to: self.step };
            }
        }
        self.begin_window(now, 1);
        RampMove::Hold
    }

    fn begin_window(&mut self, now: UnixMillis, windows: u64) {
        let secs = self
            .config
            .windows_secs
            .get(self.step)
            .copied()
            .unwrap_or(60);
        self.window_start = now;
        self.window_ms = secs_to_ms(secs) * windows;
        self.finished = 0;
        self.failed = 0;
        self.latencies_ms.clear();
    }
}

/// Nearest-rank 95th percentile.
fn p95(samples: &[u64]) -> Option<u64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = (sorted.len() as f64 * 0.95).ceil() as usize;
    sorted.get(rank.saturating_sub(1)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000;

    fn ramp() -> Ramp {
        let config = WarmupRampConfig {
            target_concurrency: 200,
            min_warm_load: 4,
            ..Default::default()
        };
        Ramp::new(&config, 0)
    }

    fn window(ramp: &mut Ramp, ok: u64, failed: u64, latency_ms: u64) {
        for _ in 0..ok {
            ramp.record(true, latency_ms);
        }
        for _ in 0..failed {
            ramp.record(false, latency_ms);
        }
    }

    #[test]
    fn climbs_every_step_on_clean_windows() {
        let mut r = ramp();
        let mut now = 0;
        let mut seen = vec![r.concurrency()];
        for (step, secs) in [30, 30, 45, 60].into_iter().enumerate() {
            window(&mut r, 100, 0, 1_000);
            assert_eq!(
                r.evaluate(now + secs * S - 1),
                RampMove::Wait,
                "window not over"
            );
            now += secs * S;
            assert_eq!(r.evaluate(now), RampMove::Advance { to: step + 1 });
            seen.push(r.concurrency());
        }
        assert_eq!(seen, vec![10, 30, 70, 120, 200]);
        window(&mut r, 100, 0, 1_000);
        assert_eq!(r.evaluate(now + 60 * S), RampMove::Hold, "100 % is held");
    }

    #[test]
    fn first_step_never_below_minimum_warm_load() {
        let config = WarmupRampConfig {
            target_concurrency: 20,
            min_warm_load: 3,
            ..Default::default()
        };
        assert_eq!(Ramp::new(&config, 0).concurrency(), 3, "5 % of 20 = 1 < 3");
    }

    #[test]
    fn slow_or_slightly_failing_windows_hold() {
        let mut r = ramp();
        window(&mut r, 100, 0, 4_500); // p95 4.5 s ≥ 2 × 2 s steady
        assert_eq!(r.evaluate(30 * S), RampMove::Hold);
        window(&mut r, 98, 2, 1_000); // 2 %: neither advance (< 1 %) nor back off (> 3 %)
        assert_eq!(r.evaluate(60 * S), RampMove::Hold);
        assert_eq!(r.evaluate(89 * S), RampMove::Wait);
        assert_eq!(
            r.evaluate(90 * S),
            RampMove::Hold,
            "an empty window learns nothing"
        );
        r.set_steady_p95_ms(3_000);
        window(&mut r, 100, 0, 4_500);
        assert_eq!(r.evaluate(120 * S), RampMove::Advance { to: 1 });
    }

    #[test]
    fn backoff_holds_an_extra_window_and_two_in_a_row_abort() {
        let mut r = ramp();
        window(&mut r, 100, 0, 1_000);
        r.evaluate(30 * S);
        window(&mut r, 100, 0, 1_000);
        assert_eq!(r.evaluate(60 * S), RampMove::Advance { to: 2 });
        window(&mut r, 95, 5, 1_000);
        assert_eq!(r.evaluate(105 * S), RampMove::Backoff { to: 1 });
        assert_eq!(r.concurrency(), 30);
        // Step 1's window is 30 s; after a backoff it is held for two.
        window(&mut r, 100, 0, 1_000);
        assert_eq!(r.evaluate(135 * S), RampMove::Wait);
        assert_eq!(r.evaluate(165 * S), RampMove::Advance { to: 2 });
        // A clean window reset the count: one more backoff is not an abort…
        window(&mut r, 90, 10, 1_000);
        assert_eq!(r.evaluate(210 * S), RampMove::Backoff { to: 1 });
        // …but a second one right after is.
        window(&mut r, 90, 10, 1_000);
        assert_eq!(r.evaluate(270 * S), RampMove::Abort);
    }

    #[test]
    fn p95_is_nearest_rank() {
        let samples: Vec<u64> = (1..=100).collect();
        assert_eq!(p95(&samples), Some(95));
        assert_eq!(p95(&[7]), Some(7));
        assert_eq!(p95(&[]), None);
    }
}
