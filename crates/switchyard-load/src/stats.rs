//! Small statistics helpers shared by the report.

/// Nearest-rank percentile of an ascending-sorted sample; `None` for an empty sample.
pub fn percentile_nearest_rank(sorted: &[f64], percentile: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let count = sorted.len();
    let rank = (percentile / 100.0 * count as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, count) - 1])
}

/// Population standard deviation divided by the mean; 0 for fewer than two values or a zero mean.
pub fn coefficient_of_variation(counts: &[u64]) -> f64 {
    if counts.len() < 2 {
        return 0.0;
    }
    let count = counts.len() as f64;
    let mean = counts.iter().map(|&value| value as f64).sum::<f64>() / count;
    if mean == 0.0 {
        return 0.0;
    }
    let variance = counts
        .iter()
        .map(|&value| (value as f64 - mean).powi(2))
        .sum::<f64>()
        / count;
    variance.sqrt() / mean
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let sample: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile_nearest_rank(&sample, 50.0), Some(5.0));
        assert_eq!(percentile_nearest_rank(&sample, 90.0), Some(9.0));
        assert_eq!(percentile_nearest_rank(&sample, 99.0), Some(10.0));
        assert_eq!(percentile_nearest_rank(&sample, 0.0), Some(1.0));
        assert_eq!(percentile_nearest_rank(&[7.0], 99.0), Some(7.0));
        assert_eq!(percentile_nearest_rank(&[], 50.0), None);
    }

    #[test]
    fn nearest_rank_on_a_hundred_values() {
        let sample: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile_nearest_rank(&sample, 99.0), Some(99.0));
        assert_eq!(percentile_nearest_rank(&sample, 50.0), Some(50.0));
    }

    #[test]
    fn coefficient_of_variation_cases() {
        assert_eq!(coefficient_of_variation(&[]), 0.0);
        assert_eq!(coefficient_of_variation(&[42]), 0.0);
        assert_eq!(coefficient_of_variation(&[5, 5, 5]), 0.0);
        assert_eq!(coefficient_of_variation(&[0, 0]), 0.0);
        // mean 2, population stddev 1 → 0.5
        assert!((coefficient_of_variation(&[1, 3]) - 0.5).abs() < 1e-12);
        // mean 5, deviations ±5 and 0 → stddev sqrt(50/3)
        let expected = (50.0_f64 / 3.0).sqrt() / 5.0;
        assert!((coefficient_of_variation(&[0, 5, 10]) - expected).abs() < 1e-12);
    }
}
