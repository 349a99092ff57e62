//! Engine compatibility from recorded fixtures: each engine's `/metrics` exposition read
//! under its own names (p90s from known bucket counts), its load gauges, `/v1/models`
//! context lengths and error shapes.

use std::time::{Duration, Instant};

use super::*;
use crate::latency::{LatencySource, Reading, WindowTracker, reading_from_metrics};

const VLLM_V0: &str = include_str!("../tests/fixtures/vllm_v0.metrics.txt");
const VLLM_V1: &str = include_str!("../tests/fixtures/vllm_v1.metrics.txt");
const SGLANG: &str = include_str!("../tests/fixtures/sglang.metrics.txt");
const LLAMACPP: &str = include_str!("../tests/fixtures/llamacpp.metrics.txt");

/// The p90s of everything the fixture holds (a window from an empty baseline).
fn p90s(kind: Option<EngineKind>, text: &str) -> (Option<f64>, Option<f64>, u64) {
    let reading = reading_from_metrics(kind, text).expect("known histograms");
    assert_eq!(reading.source, LatencySource::Metrics);
    let mut tracker = WindowTracker::default();
    let now = Instant::now();
    let empty = Reading {
        source: LatencySource::Metrics,
        ttft: Default::default(),
        tpot: Default::default(),
    };
    assert!(
        tracker
            .observe(now, empty, 1, Duration::from_secs(60))
            .is_none()
    );
    let figures = tracker
        .observe(now, reading, 1, Duration::from_secs(60))
        .expect("a window");
    (
        figures.ttft_p90_seconds,
        figures.tpot_p90_seconds,
        figures.ttft_samples,
    )
}

fn within(value: Option<f64>, low: f64, high: f64) -> bool {
    value.is_some_and(|v| v > low && v <= high)
}

#[test]
fn vllm_v0_and_v1_expositions_give_ttft_and_tpot_p90() {
    for (text, label) in [(VLLM_V0, "v0"), (VLLM_V1, "v1")] {
        for kind in [Some(EngineKind::Vllm), None] {
            let (ttft, tpot, samples) = p90s(kind, text);
            assert_eq!(samples, 100, "{label}");
            assert!(within(ttft, 0.25, 0.5), "{label} ttft {ttft:?}");
            assert!(within(tpot, 0.05, 0.075), "{label} tpot {tpot:?}");
        }
        assert!(
            reading_from_metrics(Some(EngineKind::Sglang), text).is_none(),
            "{label}: vLLM names are not SGLang's"
        );
    }
}

#[test]
fn sglang_exposition_gives_ttft_and_inter_token_p90() {
    let (ttft, tpot, samples) = p90s(Some(EngineKind::Sglang), SGLANG);
    assert_eq!(samples, 50);
    assert!(within(ttft, 0.6, 0.8), "ttft {ttft:?}");
    assert!(within(tpot, 0.02, 0.025), "tpot {tpot:?}");
    assert_eq!(p90s(None, SGLANG).0, ttft);
    assert!(reading_from_metrics(Some(EngineKind::Vllm), SGLANG).is_none());
}

#[test]
fn llamacpp_has_no_latency_histograms_but_its_gauges_are_read() {
    assert!(reading_from_metrics(Some(EngineKind::Llamacpp), LLAMACPP).is_none());
    assert!(reading_from_metrics(None, LLAMACPP).is_none());
    let load = EngineLoad::from_metrics(EngineKind::Llamacpp, LLAMACPP).expect("gauges");
    assert!(load.queued.is_some() && load.running.is_some(), "{load:?}");
    assert!(LLAMACPP.contains("llamacpp:prompt_tokens_total"));
}

#[test]
fn load_gauges_use_each_engines_names() {
    let v0 = EngineLoad::from_metrics(EngineKind::Vllm, VLLM_V0).unwrap();
    assert_eq!(v0.queued, Some(4.0));
    assert_eq!(v0.running, Some(12.0));
    assert_eq!(v0.kv_cache_usage, Some(0.8125));
    let v1 = EngineLoad::from_metrics(EngineKind::Vllm, VLLM_V1).unwrap();
    assert_eq!((v1.queued, v1.kv_cache_usage), (Some(7.0), Some(0.375)));
    let sglang = EngineLoad::from_metrics(EngineKind::Sglang, SGLANG).unwrap();
    assert_eq!(sglang.queued, Some(3.0));
    assert_eq!(sglang.running, Some(9.0));
    assert_eq!(sglang.kv_cache_usage, Some(0.28));
    assert!(EngineLoad::from_metrics(EngineKind::Sglang, VLLM_V1).is_none());
    assert!(EngineLoad::from_metrics(EngineKind::Openai, VLLM_V1).is_none());
}

#[test]
fn gauges_sum_queues_across_engines_and_ignore_longer_names() {
    let text = "vllm:num_requests_waiting{engine=\"0\"} 2\n\
                vllm:num_requests_waiting{engine=\"1\"} 3.5\n\
                vllm:num_requests_waiting_total 99\n\
                vllm:kv_cache_usage_perc{engine=\"0\"} 0.5\n\
                vllm:kv_cache_usage_perc{engine=\"1\"} 0.75\n";
    let load = EngineLoad::from_metrics(EngineKind::Vllm, text).unwrap();
    assert_eq!(load.queued, Some(5.5));
    assert_eq!(load.kv_cache_usage, Some(0.75));
    assert_eq!(load.running, None);
}

#[test]
fn models_state_the_context_length_per_engine() {
    let context = |text: &str| {
        let body: serde_json::Value = serde_json::from_str(text).unwrap();
        max_model_len(&body["data"][0])
    };
    assert_eq!(
        context(include_str!("../tests/fixtures/vllm_models.json")),
        Some(131_072)
    );
    assert_eq!(
        context(include_str!("../tests/fixtures/sglang_models.json")),
        Some(32_768)
    );
    assert_eq!(
        context(include_str!("../tests/fixtures/llamacpp_models.json")),
        Some(4096)
    );
    assert_eq!(context(r#"{"data":[{"id":"sim-llama"}]}"#), None);
}

#[test]
fn error_messages_are_found_in_every_engines_shape() {
    let vllm = error_message(include_bytes!("../tests/fixtures/vllm_error.json")).unwrap();
    assert!(
        vllm.starts_with("This model's maximum context length"),
        "{vllm}"
    );
    let sglang = error_message(include_bytes!("../tests/fixtures/sglang_error.json")).unwrap();
    assert!(sglang.contains("does not exist"), "{sglang}");
    let loading = error_message(include_bytes!("../tests/fixtures/llamacpp_loading.json"));
    assert_eq!(loading.as_deref(), Some("Loading model"));
    let context = error_message(include_bytes!("../tests/fixtures/llamacpp_error.json")).unwrap();
    assert!(context.contains("context"), "{context}");
    assert_eq!(
        error_message(br#"{"detail":[{"loc":["body","model"],"msg":"field required"}]}"#)
            .as_deref(),
        Some("field required")
    );
    assert_eq!(error_message(b"upstream connect error"), None);
}

#[test]
fn health_paths_follow_the_engine() {
    assert_eq!(EngineKind::Llamacpp.health_path(), "/health");
    assert_eq!(EngineKind::Vllm.health_path(), "/health");
    assert_eq!(EngineKind::Openai.health_path(), "/v1/models");
    assert!(!EngineKind::Openai.has_metrics());
    assert!(EngineKind::Llamacpp.has_metrics());
}

/// Recorded from the `llama-server` that `benches/e2e/llama/build.sh` builds (the
/// llama-cpp-python sdist's `vendor/llama.cpp`), run with `-c 4096 -np 2 --metrics`: newer
/// than the fixtures above, with a per-slot `n_ctx`, a reworded context error and more series.
#[test]
fn the_sdist_llama_server_is_read_as_recorded() {
    let models: serde_json::Value =
        serde_json::from_str(include_str!("../tests/fixtures/llamacpp_sdist_models.json")).unwrap();
    assert_eq!(max_model_len(&models["data"][0]), Some(2048));
    let (status, error) = crate::openai_error(
        400,
        include_bytes!("../tests/fixtures/llamacpp_sdist_error.json"),
    );
    assert_eq!(status, 400);
    assert_eq!(error["error"]["code"], "context_length_exceeded");
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds the available context size (2048 tokens)")
    );
    let metrics = include_str!("../tests/fixtures/llamacpp_sdist.metrics.txt");
    let load = EngineLoad::from_metrics(EngineKind::Llamacpp, metrics).unwrap();
    assert_eq!((load.running, load.queued), (Some(0.0), Some(0.0)));
    // No latency histograms: the gateway's own observations stand in.
    assert!(reading_from_metrics(Some(EngineKind::Llamacpp), metrics).is_none());
}
