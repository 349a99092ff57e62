//! Child actor: scrapes the worker's `/metrics` (or reads the gateway's own observations),
//! publishes the window's p90 figures, then hands them to the supervisor's judge.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::debug;

use super::messages::{ChildArgs, WorkerMsg};
use super::periodic::{Next, Round};
use crate::config::ms;
use crate::engine::EngineLoad;
use crate::http_client::{FetchError, fetch, get_request};
use crate::latency::{Reading, WindowTracker, reading_from_metrics, reading_from_observed};
use crate::metrics::Family;

/// vLLM's exposition with many models and LoRA adapters stays well under this.
const MAX_METRICS_BODY: usize = 16 * 1024 * 1024;

pub(crate) struct Collector;

pub(crate) struct CollectorState {
    args: ChildArgs,
    /// Restarting the collector loses only this baseline: one window without figures.
    window: WindowTracker,
}

impl Round for Collector {
    type Arguments = ChildArgs;
    type State = CollectorState;

    fn start(args: ChildArgs) -> (CollectorState, Option<Duration>) {
        let state = CollectorState {
            args,
            window: WindowTracker::default(),
        };
        (state, None)
    }

    async fn round(state: &mut CollectorState) -> Next {
        let config = state.args.handle.config.load();
        let handle = &state.args.handle;
        match read(&state.args, ms(config.latency_aware.scrape_timeout_ms)).await {
            Ok(reading) => {
                handle
                    .series
                    .count(Family::Scrapes, reading.source.as_str());
                let l = &config.latency_aware;
                let figures = state.window.observe(
                    Instant::now(),
                    reading,
                    l.min_samples,
                    ms(l.max_window_ms),
                );
                if let Some(figures) = figures {
                    handle.publish_latency(figures.clone());
                    let _ = state
                        .args
                        .supervisor
                        .send_message(WorkerMsg::Window(figures));
                }
            }
            Err(error) => {
                handle.series.count(Family::Scrapes, "error");
                debug!(worker = handle.name(), %error, "metrics scrape failed");
            }
        }
        Next::Every(ms(config.latency_aware.scrape_interval_ms))
    }
}

/// The worker's histograms, or the gateway's observations when the worker has no usable
/// `/metrics` (404, refused connection, none of its engine's histogram names, or an engine
/// kind that publishes none). The engine's load gauges are published on the way.
async fn read(args: &ChildArgs, timeout: Duration) -> Result<Reading, String> {
    let handle = &args.handle;
    let observed = || Ok(reading_from_observed(&handle.observed));
    let kind = handle.engine();
    if kind.is_some_and(|k| !k.has_metrics()) {
        return observed();
    }
    let request = handle
        .uri_for("/metrics")
        .map_err(|e| e.to_string())
        .and_then(|uri| get_request(uri).map_err(|e| e.to_string()))?;
    match fetch(&args.client, request, timeout, MAX_METRICS_BODY).await {
        Ok((status, body)) if status.is_success() => {
            let text = String::from_utf8_lossy(&body);
            if let Some(kind) = kind {
                handle
                    .engine_load
                    .store(EngineLoad::from_metrics(kind, &text).map(Arc::new));
            }
            match reading_from_metrics(kind, &text) {
                Some(reading) => Ok(reading),
                None => observed(),
            }
        }
        Ok((status, _)) if status == http::StatusCode::NOT_FOUND => observed(),
        Ok((status, _)) => Err(format!("status {status}")),
        Err(FetchError::Connect(_)) => observed(),
        Err(error) => Err(error.to_string()),
    }
}
