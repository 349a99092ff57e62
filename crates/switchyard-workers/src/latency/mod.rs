//! Latency figures for the overload marker: scraped histograms or gateway observations,
//! turned into per-window TTFT/TPOT p90.

mod histogram;
mod observed;
mod prefill;
mod prom_text;
mod window;

pub(crate) use observed::ObservedLatency;
pub(crate) use prefill::PrefillRate;
pub use window::{LatencyFigures, LatencySource};
pub(crate) use window::{Reading, WindowTracker};

use crate::engine::EngineKind;

/// The worker's TTFT and TPOT histograms from a `/metrics` body, read under the names its
/// engine kind publishes (any known name for a worker without a kind); `None` when it has no
/// known TTFT histogram (then the gateway's own observations are used instead).
pub(crate) fn reading_from_metrics(kind: Option<EngineKind>, text: &str) -> Option<Reading> {
    let ttft_names = EngineKind::ttft_families(kind);
    let tpot_names = EngineKind::tpot_families(kind);
    let wanted: Vec<&str> = ttft_names.iter().chain(tpot_names).copied().collect();
    let mut families = prom_text::parse_histograms(text, &wanted);
    let ttft = ttft_names.iter().find_map(|n| families.remove(*n))?;
    let tpot = tpot_names
        .iter()
        .find_map(|n| families.remove(*n))
        .unwrap_or_default();
    Some(Reading {
        source: LatencySource::Metrics,
        ttft,
        tpot,
    })
}

pub(crate) fn reading_from_observed(observed: &ObservedLatency) -> Reading {
    let (ttft, tpot) = observed.snapshot();
    Reading {
        source: LatencySource::GatewayObserved,
        ttft,
        tpot,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sglang_names_are_recognised_and_unknown_metrics_fall_back() {
        let text = "sglang:time_to_first_token_seconds_bucket{le=\"1\"} 2\n\
                    sglang:time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n\
                    sglang:inter_token_latency_seconds_bucket{le=\"+Inf\"} 7\n";
        let reading = reading_from_metrics(None, text).unwrap();
        assert_eq!(reading.source, LatencySource::Metrics);
        assert_eq!(reading.ttft.series.len(), 1);
        assert_eq!(reading.tpot.series.len(), 1);
        assert!(reading_from_metrics(None, "llamacpp:tokens_predicted_total 5\n").is_none());
        // A worker declared vLLM is not read with SGLang's names.
        assert!(reading_from_metrics(Some(EngineKind::Vllm), text).is_none());
    }
}
