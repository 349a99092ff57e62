//! Poisson arrival schedule: exponential inter-arrival gaps from a seeded `SmallRng`.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Yields the offsets (from the run start) at which requests arrive.
///
/// Offsets are absolute rather than gaps so the runner can catch up after a slow tick instead
/// of drifting below the requested rate.
#[derive(Debug)]
pub struct PoissonArrivals {
    rng: SmallRng,
    rate: f64,
    elapsed_secs: f64,
}

impl PoissonArrivals {
    /// `rate` must be positive and finite (checked by `LoadConfig::validate`).
    pub fn new(rate: f64, seed: u64) -> Self {
        Self {
            rng: SmallRng::seed_from_u64(seed),
            rate,
            elapsed_secs: 0.0,
        }
    }

    fn next_gap_secs(&mut self) -> f64 {
        // Inverse CDF of the exponential distribution; `1 - u` keeps ln away from 0.
        let uniform: f64 = self.rng.random();
        -(1.0 - uniform).ln() / self.rate
    }
}

impl Iterator for PoissonArrivals {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.elapsed_secs += self.next_gap_secs();
        Duration::try_from_secs_f64(self.elapsed_secs).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrivals_within(rate: f64, seed: u64, window: Duration) -> usize {
        PoissonArrivals::new(rate, seed)
            .take_while(|offset| *offset < window)
            .count()
    }

    #[test]
    fn rate_100_over_2_seconds_lands_in_a_plausible_band() {
        // Mean 200, stddev ≈ 14: ±4.5 σ keeps the band meaningful yet never flaky.
        for seed in 0..20 {
            let count = arrivals_within(100.0, seed, Duration::from_secs(2));
            assert!((137..=263).contains(&count), "seed {seed}: {count}");
        }
    }

    #[test]
    fn long_run_mean_rate_converges() {
        let count = arrivals_within(50.0, 7, Duration::from_secs(200));
        let achieved = count as f64 / 200.0;
        assert!((achieved - 50.0).abs() < 2.5, "achieved {achieved}");
    }

    #[test]
    fn same_seed_same_schedule_and_offsets_increase() {
        let first: Vec<Duration> = PoissonArrivals::new(10.0, 3).take(50).collect();
        let second: Vec<Duration> = PoissonArrivals::new(10.0, 3).take(50).collect();
        let other: Vec<Duration> = PoissonArrivals::new(10.0, 4).take(50).collect();
        assert_eq!(first, second);
        assert_ne!(first, other);
        assert!(first.windows(2).all(|pair| pair[0] <= pair[1]));
    }
}
