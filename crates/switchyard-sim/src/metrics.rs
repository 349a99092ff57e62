//! vLLM-compatible Prometheus metrics, one registry per worker so several
//! simulated workers can live in one process.

use prometheus::{
    Counter, CounterVec, Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, Opts, Registry,
    TextEncoder,
};

const MODEL_LABEL: &str = "model_name";

/// vLLM's `vllm:time_to_first_token_seconds` buckets.
const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's `vllm:time_per_output_token_seconds` buckets.
const TPOT_BUCKETS: &[f64] = &[
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// vLLM's request-latency buckets (e2e, queue, prefill, decode share them).
const E2E_BUCKETS: &[f64] = &[
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];

/// Point-in-time engine load written into the gauges just before each scrape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoadGauges {
    pub(crate) running: usize,
    pub(crate) waiting: usize,
    pub(crate) kv_cache_usage: f64,
    /// The engine would pay a cold start on its next request.
    pub(crate) cold: bool,
}

#[derive(Debug)]
pub(crate) struct SimMetrics {
    registry: Registry,
    pub(crate) time_to_first_token: Histogram,
    pub(crate) time_per_output_token: Histogram,
    pub(crate) e2e_latency: Histogram,
    running: Gauge,
    waiting: Gauge,
    kv_cache_usage: Gauge,
    pub(crate) prefix_cache_queries: Counter,
    pub(crate) prefix_cache_hits: Counter,
    pub(crate) prompt_tokens: Counter,
    pub(crate) generation_tokens: Counter,
    pub(crate) request_success: Counter,
    pub(crate) cold_starts: Counter,
    cold: Gauge,
}

impl SimMetrics {
    pub(crate) fn new(model: &str) -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let histogram = |name: &str, help: &str, buckets: &[f64]| {
            let vec = HistogramVec::new(
                HistogramOpts::new(name, help).buckets(buckets.to_vec()),
                &[MODEL_LABEL],
            )?;
            registry.register(Box::new(vec.clone()))?;
            Ok::<_, prometheus::Error>(vec.with_label_values(&[model]))
        };
        let gauge = |name: &str, help: &str| {
            let vec = GaugeVec::new(Opts::new(name, help), &[MODEL_LABEL])?;
            registry.register(Box::new(vec.clone()))?;
            Ok::<_, prometheus::Error>(vec.with_label_values(&[model]))
        };
        let counter = |name: &str, help: &str| {
            let vec = CounterVec::new(Opts::new(name, help), &[MODEL_LABEL])?;
            registry.register(Box::new(vec.clone()))?;
            Ok::<_, prometheus::Error>(vec.with_label_values(&[model]))
        };
        Ok(Self {
            time_to_first_token: histogram(
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                TTFT_BUCKETS,
            )?,
            time_per_output_token: histogram(
                "vllm:time_per_output_token_seconds",
                "Histogram of time per output token in seconds.",
                TPOT_BUCKETS,
            )?,
            e2e_latency: histogram(
                "vllm:e2e_request_latency_seconds",
                "Histogram of end to end request latency in seconds.",
                E2E_BUCKETS,
            )?,
            running: gauge(
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
            )?,
            waiting: gauge(
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
            )?,
            kv_cache_usage: gauge(
                "vllm:kv_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
            )?,
            prefix_cache_queries: counter(
                "vllm:prefix_cache_queries_total",
                "Prefix cache queries, in terms of number of queried tokens.",
            )?,
            prefix_cache_hits: counter(
                "vllm:prefix_cache_hits_total",
                "Prefix cache hits, in terms of number of cached tokens.",
            )?,
            prompt_tokens: counter(
                "vllm:prompt_tokens_total",
                "Number of prefill tokens processed.",
            )?,
            generation_tokens: counter(
                "vllm:generation_tokens_total",
                "Number of generation tokens processed.",
            )?,
            request_success: counter(
                "vllm:request_success_total",
                "Count of successfully processed requests.",
            )?,
            cold_starts: counter(
                "switchyard_sim_cold_starts_total",
                "Cold starts paid: requests that found the engine idle past cold_after and \
                 reloaded the model (concurrent arrivals share one).",
            )?,
            cold: gauge(
                "switchyard_sim_cold",
                "1 when the engine is cold (its next request pays a cold start), else 0.",
            )?,
            registry,
        })
    }

    /// Prometheus text exposition of every metric, with the load gauges refreshed.
    pub(crate) fn render(&self, load: LoadGauges) -> Result<String, prometheus::Error> {
        self.running.set(load.running as f64);
        self.waiting.set(load.waiting as f64);
        self.kv_cache_usage.set(load.kv_cache_usage);
        self.cold.set(if load.cold { 1.0 } else { 0.0 });
        TextEncoder::new().encode_to_string(&self.registry.gather())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_vllm_names_with_model_label() {
        let metrics = SimMetrics::new("m1").unwrap();
        metrics.time_to_first_token.observe(0.03);
        metrics.prompt_tokens.inc_by(12.0);
        let text = metrics
            .render(LoadGauges {
                running: 2,
                waiting: 1,
                kv_cache_usage: 0.25,
                cold: true,
            })
            .unwrap();
        assert!(text.contains(r#"vllm:num_requests_running{model_name="m1"} 2"#));
        assert!(text.contains(r#"vllm:num_requests_waiting{model_name="m1"} 1"#));
        assert!(text.contains(r#"vllm:kv_cache_usage_perc{model_name="m1"} 0.25"#));
        assert!(text.contains(r#"switchyard_sim_cold{model_name="m1"} 1"#));
        assert!(text.contains(r#"switchyard_sim_cold_starts_total{model_name="m1"} 0"#));
        assert!(text.contains(r#"vllm:prompt_tokens_total{model_name="m1"} 12"#));
        assert!(
            text.contains(
                r#"vllm:time_to_first_token_seconds_bucket{model_name="m1",le="0.04"} 1"#
            )
        );
        assert!(
            text.contains(
                r#"vllm:time_to_first_token_seconds_bucket{model_name="m1",le="0.02"} 0"#
            )
        );
    }
}
