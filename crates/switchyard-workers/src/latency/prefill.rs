//! How long this worker has taken to reach the first token per prompt token, as the gateway
//! saw it on finished streams: what lets a first-byte deadline grow with the prompt.
//!
//! The figure is time to first byte over prompt tokens, so it includes queueing and the
//! engine's fixed cost as well as prefill proper; it errs long, which is the safe side for a
//! deadline. Only prompts long enough for prefill to dominate are counted, and the estimate
//! rises at once on a slower observation but falls slowly, so a prompt served from the
//! prefix cache does not make the next uncached one look overdue.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Shorter prompts say more about queueing than about prefill.
const MIN_PREFILL_PROMPT_TOKENS: u64 = 512;

/// Weight of a faster observation: about twenty of them halve the gap.
const DECAY_WEIGHT: f64 = 0.05;

/// No estimate yet (a rate is never negative, so these bits are never a real value).
const EMPTY: u64 = u64::MAX;

#[derive(Debug)]
pub(crate) struct PrefillRate {
    /// Seconds per prompt token, as `f64` bits.
    seconds_per_token: AtomicU64,
}

impl Default for PrefillRate {
    fn default() -> Self {
        Self {
            seconds_per_token: AtomicU64::new(EMPTY),
        }
    }
}

impl PrefillRate {
    /// One finished stream: `prompt_tokens` reached its first byte after `ttft`.
    pub(crate) fn observe(&self, prompt_tokens: u64, ttft: Duration) {
        if prompt_tokens < MIN_PREFILL_PROMPT_TOKENS {
            return;
        }
        let sample = ttft.as_secs_f64() / prompt_tokens as f64;
        if !sample.is_finite() {
            return;
        }
        // Lost races between concurrent observers only drop one sample.
        let _ = self
            .seconds_per_token
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |bits| {
                let next = match decode(bits) {
                    Some(current) if sample < current => {
                        current + DECAY_WEIGHT * (sample - current)
                    }
                    _ => sample,
                };
                Some(next.to_bits())
            });
    }

    /// Seconds per prompt token, once a long enough prompt has been seen.
    pub(crate) fn seconds_per_token(&self) -> Option<f64> {
        decode(self.seconds_per_token.load(Ordering::Acquire))
    }
}

fn decode(bits: u64) -> Option<f64> {
    (bits != EMPTY).then(|| f64::from_bits(bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_prompts_teach_nothing_and_long_ones_set_the_rate() {
        let rate = PrefillRate::default();
        rate.observe(100, Duration::from_secs(1));
        assert_eq!(rate.seconds_per_token(), None);
        rate.observe(1000, Duration::from_millis(500));
        assert_eq!(rate.seconds_per_token(), Some(0.0005));
    }

    #[test]
    fn a_slower_prompt_raises_it_at_once_and_a_faster_one_lowers_it_slowly() {
        let rate = PrefillRate::default();
        rate.observe(1000, Duration::from_millis(100));
        rate.observe(1000, Duration::from_millis(400));
        assert_eq!(rate.seconds_per_token(), Some(0.0004));
        // A prefix-cache hit: almost free, but the next cold prompt still gets time.
        rate.observe(1000, Duration::ZERO);
        let after = rate.seconds_per_token().unwrap();
        assert!((after - 0.00038).abs() < 1e-12, "{after}");
    }
}
