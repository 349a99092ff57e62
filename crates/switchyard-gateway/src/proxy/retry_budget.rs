//! The retry budget: how many gateway retries the fleet can afford.
//!
//! Over a sliding window (default 10 s) a retry is allowed while retries stay within
//! `max_retry_ratio` × first attempts (default 20 %), or else while a token is left in the
//! bucket (refill `budget_refill_per_sec`, default 2/s, burst `budget_capacity`): the floor
//! that lets a quiet gateway retry at all. Never beyond one retry per first attempt in the
//! window: a hard 2× amplification cap. Under load a worker that fails everything therefore
//! costs at most ~1.2× (+ 2 retries/s), and no traffic pattern exceeds 2×.

use arc_swap::ArcSwap;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_core::Clock;

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Retries per request after the first attempt (0 disables retries).
    pub max_retries: u32,
    /// Backoff before retry k (1-based) is `min(base × 2^(k-1), max)` plus up to 50 % jitter.
    pub backoff_base_ms: u64,
    pub backoff_max_ms: u64,
    /// Token bucket: retry tokens added per second, and the most that can accumulate.
    pub budget_refill_per_sec: f64,
    pub budget_capacity: f64,
    /// Retries may be at most this share of first attempts over `ratio_window_secs`.
    pub max_retry_ratio: f64,
    pub ratio_window_secs: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_retries: 2,
            backoff_base_ms: 25,
            backoff_max_ms: 250,
            budget_refill_per_sec: 2.0,
            budget_capacity: 10.0,
            max_retry_ratio: 0.2,
            ratio_window_secs: 10,
        }
    }
}

impl RetryConfig {
    /// Returns the path and problem of the first invalid field.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if !(self.budget_refill_per_sec.is_finite() && self.budget_refill_per_sec >= 0.0) {
            return Err(("retry.budget_refill_per_sec", "must be a number ≥ 0".into()));
        }
        if !(self.budget_capacity.is_finite() && self.budget_capacity >= 1.0) {
            return Err(("retry.budget_capacity", "must be a number ≥ 1".into()));
        }
        if !(0.0..=1.0).contains(&self.max_retry_ratio) {
            return Err(("retry.max_retry_ratio", "must be between 0 and 1".into()));
        }
        if self.ratio_window_secs == 0 || self.ratio_window_secs > 3600 {
            return Err(("retry.ratio_window_secs", "must be 1..=3600".into()));
        }
        if self.backoff_base_ms > self.backoff_max_ms {
            return Err((
                "retry.backoff_base_ms",
                "must not exceed retry.backoff_max_ms".into(),
            ));
        }
        if self.max_retries > 10 {
            return Err(("retry.max_retries", "must be at most 10".into()));
        }
        Ok(())
    }

    /// Backoff before retry `k` (1-based), `jitter` in [0, 1).
    pub fn backoff(&self, k: u32, jitter: f64) -> Duration {
        let exp = self
            .backoff_base_ms
            .saturating_mul(1u64 << k.saturating_sub(1).min(20));
        let base = exp.min(self.backoff_max_ms) as f64;
        Duration::from_micros((base * (1.0 + 0.5 * jitter.clamp(0.0, 1.0)) * 1000.0) as u64)
    }
}

/// One-second buckets of first attempts and retries over the ratio window.
struct Window {
    start_sec: u64,
    firsts: Vec<u64>,
    retries: Vec<u64>,
}

impl Window {
    fn new(len: usize) -> Self {
        Self {
            start_sec: 0,
            firsts: vec![0; len],
            retries: vec![0; len],
        }
    }

    /// Moves the window so `sec` is its newest second, clearing seconds that fell out.
    fn advance(&mut self, sec: u64) {
        let len = self.firsts.len() as u64;
        let newest = self.start_sec + len - 1;
        if sec <= newest {
            return;
        }
        let shift = (sec - newest).min(len);
        for i in 0..shift {
            let idx = ((newest + 1 + i) % len) as usize;
            self.firsts[idx] = 0;
            self.retries[idx] = 0;
        }
        self.start_sec = sec + 1 - len;
    }

    fn slot(&self, sec: u64) -> usize {
        (sec % self.firsts.len() as u64) as usize
    }
}

struct State {
    tokens: f64,
    last_refill: Instant,
    window: Window,
}

pub struct RetryBudget {
    config: ArcSwap<RetryConfig>,
    clock: Arc<dyn Clock>,
    origin: Instant,
    state: Mutex<State>,
}

/// Why a retry was not allowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryDenied {
    /// The token bucket is empty.
    Rate,
    /// Retries already make up `max_retry_ratio` of recent first attempts.
    Ratio,
}

impl RetryBudget {
    pub fn new(config: RetryConfig, clock: Arc<dyn Clock>) -> Self {
        let now = clock.now();
        let window = Window::new(config.ratio_window_secs as usize);
        Self {
            state: Mutex::new(State {
                tokens: config.budget_capacity,
                last_refill: now,
                window,
            }),
            origin: now,
            clock,
            config: ArcSwap::from_pointee(config),
        }
    }

    pub fn config(&self) -> Arc<RetryConfig> {
        self.config.load_full()
    }

    /// Swaps in new settings at run time; a new window length starts a fresh window.
    pub fn reconfigure(&self, config: RetryConfig) {
        let mut state = self.state.lock();
        if config.ratio_window_secs as usize != state.window.firsts.len() {
            state.window = Window::new(config.ratio_window_secs as usize);
        }
        state.tokens = state.tokens.min(config.budget_capacity);
        self.config.store(Arc::new(config));
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    pub fn record_first_attempt(&self) {
        let now = self.clock.now();
        let sec = self.second(now);
        let mut state = self.state.lock();
        state.window.advance(sec);
        let slot = state.window.slot(sec);
        state.window.firsts[slot] += 1;
    }

    /// Takes one retry from the budget, or says which limit refused it.
    pub fn try_acquire(&self) -> Result<(), RetryDenied> {
        let now = self.clock.now();
        let sec = self.second(now);
        let config = self.config.load();
        let mut state = self.state.lock();
        let elapsed = now
            .saturating_duration_since(state.last_refill)
            .as_secs_f64();
        state.tokens =
            (state.tokens + elapsed * config.budget_refill_per_sec).min(config.budget_capacity);
        state.last_refill = now;
        state.window.advance(sec);
        let firsts: u64 = state.window.firsts.iter().sum();
        let retries: u64 = state.window.retries.iter().sum();
        if retries + 1 > firsts {
            return Err(RetryDenied::Ratio);
        }
        let within_ratio = (retries + 1) as f64 <= config.max_retry_ratio * firsts as f64;
        if !within_ratio {
            if state.tokens < 1.0 {
                return Err(RetryDenied::Rate);
            }
            state.tokens -= 1.0;
        }
        let slot = state.window.slot(sec);
        state.window.retries[slot] += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::ManualClock;

    fn budget(config: RetryConfig) -> (RetryBudget, ManualClock) {
        let clock = ManualClock::new();
        (RetryBudget::new(config, Arc::new(clock.clone())), clock)
    }

    #[test]
    fn ratio_cap_bounds_amplification_when_everything_fails() {
        let (budget, clock) = budget(RetryConfig::default());
        let (mut firsts, mut retries) = (0u64, 0u64);
        // 100 req/s for 30 s, every attempt fails and would retry twice.
        for _ in 0..30 {
            for _ in 0..100 {
                budget.record_first_attempt();
                firsts += 1;
                for _ in 0..2 {
                    if budget.try_acquire().is_ok() {
                        retries += 1;
                    }
                }
            }
            clock.advance(Duration::from_secs(1));
        }
        let amplification = (firsts + retries) as f64 / firsts as f64;
        // 20 % by ratio plus at most 2/s (and the burst of 10) from the bucket.
        assert!(
            amplification <= 1.2 + 70.0 / 3000.0 + 1e-9,
            "amplification {amplification}"
        );
        assert!(
            amplification >= 1.2,
            "the budget should still allow retries: {amplification}"
        );
    }

    #[test]
    fn token_bucket_is_the_floor_beyond_the_ratio() {
        let (budget, clock) = budget(RetryConfig {
            max_retry_ratio: 0.0,
            budget_capacity: 3.0,
            budget_refill_per_sec: 2.0,
            ..RetryConfig::default()
        });
        for _ in 0..100 {
            budget.record_first_attempt();
        }
        for _ in 0..3 {
            assert_eq!(budget.try_acquire(), Ok(()));
        }
        assert_eq!(budget.try_acquire(), Err(RetryDenied::Rate));
        clock.advance(Duration::from_millis(500));
        assert_eq!(budget.try_acquire(), Ok(()), "one token refilled in 0.5 s");
        assert_eq!(budget.try_acquire(), Err(RetryDenied::Rate));
    }

    #[test]
    fn a_quiet_gateway_can_retry_but_never_beyond_two_x() {
        let (budget, _clock) = budget(RetryConfig::default());
        budget.record_first_attempt();
        assert_eq!(
            budget.try_acquire(),
            Ok(()),
            "the bucket lets a lone request retry"
        );
        assert_eq!(
            budget.try_acquire(),
            Err(RetryDenied::Ratio),
            "a second retry for one first attempt would exceed 2x"
        );
    }

    #[test]
    fn old_first_attempts_leave_the_window() {
        let (budget, clock) = budget(RetryConfig::default());
        for _ in 0..50 {
            budget.record_first_attempt();
        }
        assert_eq!(budget.try_acquire(), Ok(()));
        clock.advance(Duration::from_secs(11));
        assert_eq!(budget.try_acquire(), Err(RetryDenied::Ratio));
    }

    #[test]
    fn backoff_grows_exponentially_with_capped_jitter() {
        let config = RetryConfig::default();
        assert_eq!(config.backoff(1, 0.0), Duration::from_millis(25));
        assert_eq!(config.backoff(2, 0.0), Duration::from_millis(50));
        assert_eq!(config.backoff(5, 0.0), Duration::from_millis(250));
        assert_eq!(config.backoff(1, 0.999_999).as_millis(), 37);
    }

    #[test]
    fn reconfigure_takes_effect_at_once() {
        let (budget, _clock) = budget(RetryConfig::default());
        for _ in 0..10 {
            budget.record_first_attempt();
        }
        budget.reconfigure(RetryConfig {
            max_retry_ratio: 0.0,
            budget_capacity: 1.0,
            ..RetryConfig::default()
        });
        assert_eq!(budget.config().budget_capacity, 1.0);
        assert_eq!(budget.try_acquire(), Ok(()));
        assert_eq!(budget.try_acquire(), Err(RetryDenied::Rate));
    }

    #[test]
    fn validation_names_the_field() {
        let bad = RetryConfig {
            max_retry_ratio: 1.5,
            ..RetryConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().0, "retry.max_retry_ratio");
        assert!(RetryConfig::default().validate().is_ok());
    }
}
