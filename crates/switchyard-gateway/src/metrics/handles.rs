//! Handles to labelled series kept after their first use: `with_label_values` hashes the label
//! values and takes the vector's lock on every call, a measurable share of a request that
//! touches a dozen series. A series is still created on first use, never before, so the
//! exposition lists exactly the series it listed without the cache.

use prometheus::{Histogram, HistogramVec, IntCounter, IntCounterVec};
use std::sync::OnceLock;

/// A vector of series with one label.
pub trait Family {
    type Series;
    fn series(&self, label: &str) -> Self::Series;
}

impl Family for IntCounterVec {
    type Series = IntCounter;
    fn series(&self, label: &str) -> IntCounter {
        self.with_label_values(&[label])
    }
}

impl Family for HistogramVec {
    type Series = Histogram;
    fn series(&self, label: &str) -> Histogram {
        self.with_label_values(&[label])
    }
}

/// The series of `vec` for up to `N` label values, each known by a fixed index.
pub struct Lazy<V: Family, const N: usize> {
    vec: V,
    series: [OnceLock<V::Series>; N],
}

impl<V: Family, const N: usize> Lazy<V, N> {
    pub fn new(vec: V) -> Self {
        Self {
            vec,
            series: std::array::from_fn(|_| OnceLock::new()),
        }
    }

    /// The series for `label`. Every call with the same `index` must give the same `label`
    /// (callers derive both from one enum value or one constant); `index` is taken modulo `N`.
    pub fn get(&self, index: usize, label: &str) -> &V::Series {
        self.series[index % N].get_or_init(|| self.vec.series(label))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::{Encoder, Opts, Registry, TextEncoder};

    fn text(registry: &Registry) -> String {
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&registry.gather(), &mut out)
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_series_appears_on_first_use_and_counts_with_the_vector() {
        let registry = Registry::new();
        let vec = IntCounterVec::new(Opts::new("t_total", "t"), &["kind"]).unwrap();
        registry.register(Box::new(vec.clone())).unwrap();
        let lazy: Lazy<IntCounterVec, 2> = Lazy::new(vec.clone());
        assert!(
            !text(&registry).contains("t_total{"),
            "nothing before first use"
        );
        lazy.get(0, "first").inc();
        lazy.get(0, "first").inc();
        vec.with_label_values(&["first"]).inc();
        assert_eq!(vec.with_label_values(&["first"]).get(), 3);
        let exposition = text(&registry);
        assert!(
            exposition.contains("t_total{kind=\"first\"} 3"),
            "{exposition}"
        );
        assert!(!exposition.contains("retry"), "{exposition}");
        lazy.get(1, "retry").inc();
        assert_eq!(vec.with_label_values(&["retry"]).get(), 1);
    }
}
