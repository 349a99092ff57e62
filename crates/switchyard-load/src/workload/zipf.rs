//! Zipf-distributed rank sampling by inverse CDF (ranks are 0-based: rank 0 is the hottest).

use rand::Rng;
use rand::rngs::SmallRng;

#[derive(Clone, Debug)]
pub struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    /// `count` ranks with weight `1 / (rank + 1)^exponent`; `count` must be at least 1.
    pub fn new(count: usize, exponent: f64) -> Self {
        let mut total = 0.0;
        let mut cumulative: Vec<f64> = (1..=count.max(1))
            .map(|rank| {
                total += 1.0 / (rank as f64).powf(exponent);
                total
            })
            .collect();
        for value in &mut cumulative {
            *value /= total;
        }
        Self { cumulative }
    }

    pub fn sample(&self, rng: &mut SmallRng) -> usize {
        let uniform: f64 = rng.random();
        let index = self.cumulative.partition_point(|&value| value <= uniform);
        // Rounding can leave the last cumulative value a hair below 1.0.
        index.min(self.cumulative.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn top_rank_is_clearly_hotter_than_average_and_counts_decrease() {
        let zipf = Zipf::new(256, 1.1);
        let mut rng = SmallRng::seed_from_u64(11);
        let draws = 50_000;
        let mut counts = vec![0_u32; 256];
        for _ in 0..draws {
            counts[zipf.sample(&mut rng)] += 1;
        }
        let average = f64::from(draws) / 256.0;
        assert!(f64::from(counts[0]) > 10.0 * average, "top {}", counts[0]);
        assert!(counts[0] > counts[1] && counts[1] > counts[9] && counts[9] > counts[200]);
    }

    #[test]
    fn single_rank_always_sampled() {
        let zipf = Zipf::new(1, 1.1);
        let mut rng = SmallRng::seed_from_u64(0);
        assert!((0..100).all(|_| zipf.sample(&mut rng) == 0));
    }
}
