//! What differs between inference engines behind the same OpenAI API: the health path and
//! its meaning, the names of the latency histograms and load gauges in `/metrics`, where
//! `/v1/models` states the context length, and the shape of error bodies.
//!
//! A worker with no engine kind keeps the generic behaviour: health at `health.path`, any
//! known vLLM or SGLang histogram, the gateway's own observations otherwise.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The server software of a worker, as its spec names it (`engine = "vllm"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    Vllm,
    Sglang,
    /// llama.cpp's `llama-server`: `/health` answers 503 while the model loads; `/metrics`
    /// (only with `--metrics`) has counters and gauges but no latency histograms.
    Llamacpp,
    /// Any other OpenAI-compatible server: no health endpoint or metrics assumed.
    Openai,
}

/// Histograms the generic (kind-less) worker is read with, in order of preference.
const ANY_TTFT: &[&str] = &[
    "vllm:time_to_first_token_seconds",
    "sglang:time_to_first_token_seconds",
];
const ANY_TPOT: &[&str] = &[
    "vllm:time_per_output_token_seconds",
    "vllm:inter_token_latency_seconds",
    "sglang:time_per_output_token_seconds",
    "sglang:inter_token_latency_seconds",
];

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
            EngineKind::Llamacpp => "llamacpp",
            EngineKind::Openai => "openai",
        }
    }

    /// The path whose 2xx means "ready to serve". vLLM answers `/health` 200 once the engine
    /// runs (500 when it died), SGLang 200 (503 while unhealthy), llama.cpp 503 with
    /// `unavailable_error` while loading; a plain OpenAI server is judged by `/v1/models`.
    pub fn health_path(self) -> &'static str {
        match self {
            EngineKind::Vllm | EngineKind::Sglang | EngineKind::Llamacpp => "/health",
            EngineKind::Openai => "/v1/models",
        }
    }

    /// Whether scraping `/metrics` can tell anything (llama.cpp's gauges, yes; an unknown
    /// OpenAI server, no: the gateway's observations are used without asking).
    pub fn has_metrics(self) -> bool {
        !matches!(self, EngineKind::Openai)
    }

    /// TTFT histograms, in order of preference.
    pub fn ttft_families(kind: Option<Self>) -> &'static [&'static str] {
        match kind {
            None => ANY_TTFT,
            Some(EngineKind::Vllm) => &["vllm:time_to_first_token_seconds"],
            Some(EngineKind::Sglang) => &["sglang:time_to_first_token_seconds"],
            Some(EngineKind::Llamacpp | EngineKind::Openai) => &[],
        }
    }

    /// Time-per-output-token histograms, in order of preference (vLLM renamed its family
    /// to inter-token latency; SGLang publishes either depending on the version).
    pub fn tpot_families(kind: Option<Self>) -> &'static [&'static str] {
        match kind {
            None => ANY_TPOT,
            Some(EngineKind::Vllm) => &[
                "vllm:inter_token_latency_seconds",
                "vllm:time_per_output_token_seconds",
            ],
            Some(EngineKind::Sglang) => &[
                "sglang:inter_token_latency_seconds",
                "sglang:time_per_output_token_seconds",
            ],
            Some(EngineKind::Llamacpp | EngineKind::Openai) => &[],
        }
    }

    /// Gauge of requests waiting for a slot.
    fn queue_gauges(self) -> &'static [&'static str] {
        match self {
            EngineKind::Vllm => &["vllm:num_requests_waiting"],
            EngineKind::Sglang => &["sglang:num_queue_reqs"],
            EngineKind::Llamacpp => &["llamacpp:requests_deferred"],
            EngineKind::Openai => &[],
        }
    }

    /// Gauge of the KV cache's used share, 0..1 (vLLM renamed `gpu_cache_usage_perc` to
    /// `kv_cache_usage_perc`; both are ratios despite the name). llama.cpp dropped its
    /// `kv_cache_usage_ratio`; the older name is still read when present.
    fn kv_usage_gauges(self) -> &'static [&'static str] {
        match self {
            EngineKind::Vllm => &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
            EngineKind::Sglang => &["sglang:token_usage"],
            EngineKind::Llamacpp => &["llamacpp:kv_cache_usage_ratio"],
            EngineKind::Openai => &[],
        }
    }

    /// Gauge of requests being processed.
    fn running_gauges(self) -> &'static [&'static str] {
        match self {
            EngineKind::Vllm => &["vllm:num_requests_running"],
            EngineKind::Sglang => &["sglang:num_running_reqs"],
            EngineKind::Llamacpp => &["llamacpp:requests_processing"],
            EngineKind::Openai => &[],
        }
    }
}

/// The engine's own view of its load, from the last `/metrics` scrape.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct EngineLoad {
    /// Requests waiting for a slot (summed over the engine's series).
    pub queued: Option<f64>,
    /// Requests being processed.
    pub running: Option<f64>,
    /// Used share of the KV cache, 0..1 (the fullest series).
    pub kv_cache_usage: Option<f64>,
}

impl EngineLoad {
    /// Reads the engine's load gauges; `None` when none of them is in the text.
    pub fn from_metrics(kind: EngineKind, text: &str) -> Option<Self> {
        let load = EngineLoad {
            queued: first_gauge(text, kind.queue_gauges(), Combine::Sum),
            running: first_gauge(text, kind.running_gauges(), Combine::Sum),
            kv_cache_usage: first_gauge(text, kind.kv_usage_gauges(), Combine::Max),
        };
        (load != EngineLoad::default()).then_some(load)
    }
}

#[derive(Clone, Copy)]
enum Combine {
    Sum,
    Max,
}

/// The first of `names` present in the exposition, its series combined.
fn first_gauge(text: &str, names: &[&str], combine: Combine) -> Option<f64> {
    names.iter().find_map(|name| {
        let mut found: Option<f64> = None;
        for line in text.lines() {
            let Some(rest) = line.strip_prefix(name) else {
                continue;
            };
            // `name{labels} value` or `name value`; not a longer name sharing the prefix.
            let rest = match rest.chars().next() {
                Some('{') => rest.split_once('}').map(|(_, after)| after),
                Some(' ') | Some('\t') => Some(rest),
                _ => None,
            };
            let Some(value) = rest
                .and_then(|r| r.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
                .filter(|v| v.is_finite())
            else {
                continue;
            };
            found = Some(match (found, combine) {
                (None, _) => value,
                (Some(acc), Combine::Sum) => acc + value,
                (Some(acc), Combine::Max) => acc.max(value),
            });
        }
        found
    })
}

/// The context length one `/v1/models` entry states: `max_model_len` (vLLM, SGLang), else
/// llama.cpp's `meta.n_ctx` (the context a slot has; `n_ctx_train` when that is absent).
pub fn max_model_len(entry: &Value) -> Option<u64> {
    entry
        .get("max_model_len")
        .and_then(Value::as_u64)
        .or_else(|| {
            let meta = entry.get("meta")?;
            meta.get("n_ctx")
                .and_then(Value::as_u64)
                .filter(|n| *n > 0)
                .or_else(|| meta.get("n_ctx_train").and_then(Value::as_u64))
        })
        .filter(|n| *n > 0)
}

/// The message of an engine's error body, whatever its shape: OpenAI and llama.cpp nest it
/// (`{"error":{"message"}}`), vLLM and SGLang put it at the top (`{"object":"error",
/// "message"}`), FastAPI validation errors say `detail`.
pub fn error_message(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let text = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
    text(value.get("error").and_then(|e| e.get("message")))
        .or_else(|| text(value.get("error")))
        .or_else(|| text(value.get("message")))
        .or_else(|| text(value.get("detail")))
        .or_else(|| {
            value
                .get("detail")
                .and_then(Value::as_array)
                .and_then(|d| d.first())
                .and_then(|d| text(d.get("msg")))
        })
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
