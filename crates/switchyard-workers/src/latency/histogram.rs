//! Window deltas of cumulative histograms and `histogram_quantile` over them.

use std::collections::{BTreeMap, HashMap};

/// One histogram family as scraped: per label set (without `le`), cumulative counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct HistogramFamily {
    pub(crate) series: BTreeMap<String, Series>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Series {
    /// `(le, cumulative count)`, sorted by `le`.
    pub(crate) buckets: Vec<(f64, f64)>,
    pub(crate) count: Option<f64>,
}

impl Series {
    /// Buckets ending with `+Inf`; taken from `_count` when the `+Inf` bucket is missing.
    fn complete(&self) -> Option<Vec<(f64, f64)>> {
        let mut buckets = self.buckets.clone();
        if buckets.last().is_none_or(|(le, _)| *le != f64::INFINITY) {
            buckets.push((f64::INFINITY, self.count?));
        }
        Some(buckets)
    }
}

/// Cumulative counts observed inside a window, summed over every series of a family.
pub(crate) type Buckets = Vec<(f64, f64)>;

/// What happened between `previous` and `current`: per series the bucket deltas, where a
/// counter that went down means the worker restarted (the delta is then the current count),
/// a series new in `current` counts whole, and a bucket missing from either scrape is dropped
/// (cumulative buckets stay correct on any subset of bounds that keeps `+Inf`).
pub(crate) fn window_delta(previous: &HistogramFamily, current: &HistogramFamily) -> Buckets {
    let mut deltas: Vec<Buckets> = Vec::new();
    for (key, series) in &current.series {
        let Some(now) = series.complete() else {
            continue;
        };
        let before = previous.series.get(key).and_then(Series::complete);
        deltas.push(match before {
            None => now,
            Some(before) => series_delta(&before, &now),
        });
    }
    sum_on_common_bounds(&deltas)
}

fn series_delta(before: &[(f64, f64)], now: &[(f64, f64)]) -> Buckets {
    let before: HashMap<u64, f64> = before.iter().map(|(le, c)| (le.to_bits(), *c)).collect();
    let common: Vec<(f64, f64, f64)> = now
        .iter()
        .filter_map(|(le, c)| before.get(&le.to_bits()).map(|b| (*le, *b, *c)))
        .collect();
    let reset = common.iter().any(|(_, b, c)| c < b);
    if reset {
        return now.to_vec();
    }
    common.into_iter().map(|(le, b, c)| (le, c - b)).collect()
}

fn sum_on_common_bounds(deltas: &[Buckets]) -> Buckets {
    let Some(first) = deltas.first() else {
        return Vec::new();
    };
    let mut bounds: Vec<f64> = first.iter().map(|(le, _)| *le).collect();
    for delta in &deltas[1..] {
        bounds.retain(|le| delta.iter().any(|(l, _)| l.to_bits() == le.to_bits()));
    }
    bounds
        .into_iter()
        .map(|le| {
            let total = deltas
                .iter()
                .filter_map(|d| d.iter().find(|(l, _)| l.to_bits() == le.to_bits()))
                .map(|(_, c)| *c)
                .sum();
            (le, total)
        })
        .collect()
}

/// Observations in the window (the `+Inf` bucket).
pub(crate) fn sample_count(buckets: &[(f64, f64)]) -> u64 {
    match buckets.last() {
        Some((le, count)) if *le == f64::INFINITY && *count > 0.0 => count.round() as u64,
        _ => 0,
    }
}

/// Prometheus' `histogram_quantile`: linear interpolation inside the bucket holding the
/// rank, the lower bound of the first bucket taken as 0, and a rank in the `+Inf` bucket
/// answered with the highest finite bound. `None` without observations.
pub(crate) fn quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    if buckets.len() < 2 || buckets.last()?.0 != f64::INFINITY {
        return None;
    }
    // Scrapes are not atomic across buckets; Prometheus forces monotonicity the same way.
    let mut running = 0.0_f64;
    let fixed: Vec<(f64, f64)> = buckets
        .iter()
        .map(|(le, c)| {
            running = running.max(*c);
            (*le, running)
        })
        .collect();
    let observations = fixed.last()?.1;
    if observations <= 0.0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * observations;
    let b = fixed.iter().position(|(_, c)| *c >= rank)?;
    if b == fixed.len() - 1 {
        return Some(fixed[b - 1].0);
    }
    let (end, count_end) = fixed[b];
    if b == 0 && end <= 0.0 {
        return Some(end);
    }
    let (start, count_start) = if b == 0 { (0.0, 0.0) } else { fixed[b - 1] };
    let in_bucket = count_end - count_start;
    if in_bucket <= 0.0 {
        return Some(end);
    }
    Some(start + (end - start) * ((rank - count_start) / in_bucket))
}

#[cfg(test)]
mod tests {
    use super::*;

    const INF: f64 = f64::INFINITY;

    fn family(series: &[(&str, &[(f64, f64)])]) -> HistogramFamily {
        HistogramFamily {
            series: series
                .iter()
                .map(|(k, b)| {
                    (
                        k.to_string(),
                        Series {
                            buckets: b.to_vec(),
                            count: None,
                        },
                    )
                })
                .collect(),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn quantile_interpolates_like_prometheus() {
        // 10 in (0,1], 80 in (1,2], 10 in (2,4]: rank 90 is the top of (1,2].
        let b = [(1.0, 10.0), (2.0, 90.0), (4.0, 100.0), (INF, 100.0)];
        assert!(close(quantile(0.9, &b).unwrap(), 2.0));
        // rank 50: 40 of the 80 in (1,2] -> 1.5
        assert!(close(quantile(0.5, &b).unwrap(), 1.5));
        // rank 5 in the first bucket interpolates from 0.
        assert!(close(quantile(0.05, &b).unwrap(), 0.5));
        // rank in +Inf -> highest finite bound.
        let tail = [(1.0, 1.0), (2.0, 2.0), (INF, 10.0)];
        assert!(close(quantile(0.9, &tail).unwrap(), 2.0));
        assert_eq!(quantile(0.9, &[(1.0, 0.0), (INF, 0.0)]), None);
        assert_eq!(quantile(0.9, &[(INF, 5.0)]), None);
        assert_eq!(quantile(0.9, &[(1.0, 5.0), (2.0, 5.0)]), None);
    }

    #[test]
    fn non_monotonic_buckets_are_repaired() {
        let b = [(1.0, 10.0), (2.0, 8.0), (4.0, 20.0), (INF, 20.0)];
        // Repaired to 10,10,20: rank 18 -> 8 of 10 in (2,4] -> 3.6.
        assert!(close(quantile(0.9, &b).unwrap(), 3.6));
    }

    #[test]
    fn window_uses_deltas_not_lifetime_totals() {
        // Lifetime: 1000 fast requests; window: 10 slow ones.
        let before = family(&[("m", &[(1.0, 1000.0), (40.0, 1000.0), (INF, 1000.0)])]);
        let after = family(&[("m", &[(1.0, 1000.0), (40.0, 1010.0), (INF, 1010.0)])]);
        let delta = window_delta(&before, &after);
        assert_eq!(delta, vec![(1.0, 0.0), (40.0, 10.0), (INF, 10.0)]);
        assert_eq!(sample_count(&delta), 10);
        // p90 of the window is deep in (1,40]; lifetime p90 would be under 1 s.
        assert!(quantile(0.9, &delta).unwrap() > 30.0);
    }

    #[test]
    fn counter_reset_takes_the_current_counts() {
        let before = family(&[("m", &[(1.0, 500.0), (INF, 600.0)])]);
        let after = family(&[("m", &[(1.0, 3.0), (INF, 4.0)])]);
        assert_eq!(window_delta(&before, &after), vec![(1.0, 3.0), (INF, 4.0)]);
    }

    #[test]
    fn missing_bucket_is_dropped_and_inf_comes_from_count() {
        let before = family(&[("m", &[(0.5, 1.0), (1.0, 2.0), (2.0, 3.0), (INF, 3.0)])]);
        // This scrape lost the 1.0 bucket and the +Inf bucket (only _count).
        let mut after = family(&[("m", &[(0.5, 1.0), (2.0, 13.0)])]);
        after.series.get_mut("m").unwrap().count = Some(13.0);
        let delta = window_delta(&before, &after);
        assert_eq!(delta, vec![(0.5, 0.0), (2.0, 10.0), (INF, 10.0)]);
        assert!(close(quantile(0.9, &delta).unwrap(), 0.5 + 1.5 * 0.9));
    }

    #[test]
    fn series_are_summed_and_new_series_count_whole() {
        let before = family(&[("a", &[(1.0, 5.0), (INF, 5.0)])]);
        let after = family(&[
            ("a", &[(1.0, 7.0), (INF, 8.0)]),
            ("b", &[(1.0, 1.0), (INF, 4.0)]),
        ]);
        assert_eq!(window_delta(&before, &after), vec![(1.0, 3.0), (INF, 7.0)]);
    }
}
