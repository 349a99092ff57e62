//! `Retry-After` for 429/503: exponential backoff with a cap, plus enough jitter that a wave
//! of refused clients does not come back in step (a synchronised return would overload the
//! gateway again just as it recovers).

use rand::Rng;
use std::time::Duration;

use crate::config::RetryAfterConfig;

/// Most the caller-wide refusal streak adds to a client's exponent (×4 at most).
pub const MAX_STREAK_EXTRA: u32 = 2;

/// The backoff exponent for one refused client: its own retry count (the
/// `x-switchyard-retry-count` header, or how often its `x-request-id` was seen), plus at
/// most [`MAX_STREAK_EXTRA`] from its caller's refusals in a row (+1 from 10 in a row, +2
/// from 100). The streak is per caller, and one caller is many clients — with no tenants
/// configured, every client is `anonymous` — so letting it set the exponent told a client
/// refused for the first time to wait the 60 s cap because others had been refused. It is
/// passed (`Some`) only for a configured tenant, whose key names one service: there a long
/// streak is that service not backing off, worth a bounded nudge even when its clients
/// neither count retries nor reuse request ids.
pub fn exponent(client_retry: u32, caller_streak: Option<u32>) -> u32 {
    let extra = caller_streak
        .and_then(|streak| streak.checked_ilog10())
        .unwrap_or(0)
        .min(MAX_STREAK_EXTRA);
    client_retry.saturating_add(extra)
}

/// `min(base · 2^k, cap)`: the deterministic part.
pub fn backoff(config: &RetryAfterConfig, k: u32) -> Duration {
    let factor = 1u64.checked_shl(k.min(63)).unwrap_or(u64::MAX);
    Duration::from_millis(config.base_ms.saturating_mul(factor).min(config.cap_ms))
}

/// `backoff(k)` plus jitter uniform in `[0, jitter_ratio × backoff(k)]`, `k` from
/// [`exponent`].
pub fn retry_after(config: &RetryAfterConfig, k: u32, rng: &mut impl Rng) -> Duration {
    let backoff = backoff(config, k);
    let jitter_max = backoff.as_secs_f64() * config.jitter_ratio;
    if jitter_max <= 0.0 {
        return backoff;
    }
    backoff + Duration::from_secs_f64(rng.random_range(0.0..=jitter_max))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn backoff_doubles_per_retry_and_is_capped_at_sixty_seconds() {
        let config = RetryAfterConfig::default();
        let secs = |k| backoff(&config, k).as_secs();
        assert_eq!(
            [0, 1, 2, 5].map(secs),
            [1, 2, 4, 32],
            "base 1 s doubling per retry"
        );
        assert_eq!(secs(6), 60, "64 s is capped");
        assert_eq!(secs(40), 60);
        assert_eq!(secs(u32::MAX), 60, "huge retry counts cannot overflow");
    }

    #[test]
    fn jitter_spreads_uniformly_over_half_the_backoff() {
        let config = RetryAfterConfig::default();
        let mut rng = StdRng::seed_from_u64(7);
        let samples: Vec<f64> = (0..10_000)
            .map(|_| retry_after(&config, 3, &mut rng).as_secs_f64())
            .collect();
        // Backoff 8 s; jitter within [0, 4] s.
        assert!(samples.iter().all(|s| (8.0..=12.0).contains(s)));
        let mean = samples.iter().sum::<f64>() / samples.len() as f64;
        assert!(
            (mean - 10.0).abs() < 0.1,
            "uniform jitter centres at +2 s, got {mean}"
        );
        let mut quarters = [0usize; 4];
        for s in &samples {
            quarters[(((s - 8.0) / 1.0) as usize).min(3)] += 1;
        }
        for count in quarters {
            assert!(
                (2_250..=2_750).contains(&count),
                "not uniform: {quarters:?}"
            );
        }
    }

    #[test]
    fn the_exponent_follows_the_client_and_the_callers_streak_adds_little() {
        assert_eq!(exponent(0, None), 0);
        assert_eq!(exponent(4, None), 4);
        assert_eq!(
            [1, 9, 10, 99, 100, 1_000_000].map(|s| exponent(0, Some(s))),
            [0, 0, 1, 1, 2, 2],
            "bounded at +2"
        );
        assert_eq!(exponent(u32::MAX, Some(1_000)), u32::MAX);
    }

    #[test]
    fn jitter_rides_on_top_of_the_cap_and_can_be_disabled() {
        let mut rng = StdRng::seed_from_u64(1);
        let config = RetryAfterConfig::default();
        let capped: Vec<Duration> = (0..1_000)
            .map(|_| retry_after(&config, 20, &mut rng))
            .collect();
        assert!(
            capped
                .iter()
                .all(|d| *d >= Duration::from_secs(60) && *d <= Duration::from_secs(90))
        );
        assert!(capped.iter().any(|d| *d > Duration::from_secs(85)));
        let exact = RetryAfterConfig {
            jitter_ratio: 0.0,
            ..RetryAfterConfig::default()
        };
        assert_eq!(retry_after(&exact, 2, &mut rng), Duration::from_secs(4));
    }
}
