//! Counters of the request path's degradation decisions, one per branch.

use prometheus::{IntCounterVec, Opts, Registry};
use switchyard_warmup::downgrade::DowngradeMetrics;

pub struct DegradationMetrics {
    pub verdicts: IntCounterVec,
    pub downgrades: DowngradeMetrics,
    pub cache_fills: IntCounterVec,
}

impl DegradationMetrics {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let verdicts = IntCounterVec::new(
            Opts::new(
                "switchyard_degradation_verdicts_total",
                "Degradation verdicts on business requests (serve, serve_at, cached_or_warmed_only, fallback).",
            ),
            &["verdict"],
        )?;
        let cache_fills = IntCounterVec::new(
            Opts::new(
                "switchyard_degradation_cache_fills_total",
                "Successful non-streaming answers offered to the response cache, by outcome \
                 (stored, not_captured, not_ok).",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(verdicts.clone()))?;
        registry.register(Box::new(cache_fills.clone()))?;
        for verdict in ["serve", "serve_at", "cached_or_warmed_only", "fallback"] {
            verdicts.with_label_values(&[verdict]);
        }
        for outcome in ["stored", "not_captured", "not_ok"] {
            cache_fills.with_label_values(&[outcome]);
        }
        Ok(Self {
            verdicts,
            downgrades: DowngradeMetrics::new(registry)?,
            cache_fills,
        })
    }
}
