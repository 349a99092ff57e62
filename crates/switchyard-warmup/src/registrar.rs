//! Registers each metric in the registry its owner passes in as the metric is built, so a
//! metrics struct lists only names, help texts and labels.

use prometheus::core::Collector;
use prometheus::{
    Gauge, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
};

pub(crate) struct Registrar<'a>(pub(crate) &'a Registry);

impl Registrar<'_> {
    fn register<M: Collector + Clone + 'static>(&self, metric: M) -> Result<M, prometheus::Error> {
        self.0.register(Box::new(metric.clone()))?;
        Ok(metric)
    }

    pub(crate) fn counter_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntCounterVec, prometheus::Error> {
        self.register(IntCounterVec::new(Opts::new(name, help), labels)?)
    }

    pub(crate) fn counter(&self, name: &str, help: &str) -> Result<IntCounter, prometheus::Error> {
        self.register(IntCounter::new(name, help)?)
    }

    pub(crate) fn gauge(&self, name: &str, help: &str) -> Result<Gauge, prometheus::Error> {
        self.register(Gauge::new(name, help)?)
    }

    pub(crate) fn int_gauge(&self, name: &str, help: &str) -> Result<IntGauge, prometheus::Error> {
        self.register(IntGauge::new(name, help)?)
    }

    pub(crate) fn histogram_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: &[f64],
    ) -> Result<HistogramVec, prometheus::Error> {
        self.register(HistogramVec::new(
            HistogramOpts::new(name, help).buckets(buckets.to_vec()),
            labels,
        )?)
    }
}
