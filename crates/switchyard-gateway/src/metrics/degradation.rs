//! Counters of the request path's degradation decisions, one per branch.

use prometheus::{IntCounterVec, Opts, Registry};
use switchyard_warmup::downgrade::DowngradeMetrics;

use super::Lazy;

pub struct DegradationMetrics {
    /// By verdict, indexed as [`VERDICTS`].
    pub verdicts: Lazy<IntCounterVec, 4>,
    pub downgrades: DowngradeMetrics,
    /// By outcome, indexed as [`CACHE_FILLS`].
    pub cache_fills: Lazy<IntCounterVec, 3>,
}

/// The `verdict` labels, by index into [`DegradationMetrics::verdicts`].
pub const VERDICTS: [&str; 4] = ["serve", "serve_at", "cached_or_warmed_only", "fallback"];
/// The `outcome` labels, by index into [`DegradationMetrics::cache_fills`].
pub const CACHE_FILLS: [&str; 3] = ["stored", "not_captured", "not_ok"];

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
        let verdicts = Lazy::new(verdicts);
        for (index, verdict) in VERDICTS.iter().enumerate() {
            verdicts.get(index, verdict);
        }
        let cache_fills = Lazy::new(cache_fills);
        for (index, outcome) in CACHE_FILLS.iter().enumerate() {
            cache_fills.get(index, outcome);
        }
        Ok(Self {
            verdicts,
            downgrades: DowngradeMetrics::new(registry)?,
            cache_fills,
        })
    }
}
