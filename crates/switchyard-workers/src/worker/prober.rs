//! Child actor, alive only while the worker is marked overloaded or hung: sends a streamed
//! completion shaped like traffic at a fixed cadence, times it (`probe_timing`) and reports
//! each verdict to the supervisor's judge. Probes carry `x-switchyard-purpose: probe` and
//! never touch the breaker or the observed latencies, so they never count as user traffic.

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::Full;
use std::time::Duration;
use switchyard_core::Purpose;
use switchyard_core::header_names;
use tracing::debug;

use super::decisions::ProbeResult;
use super::messages::{ChildArgs, WorkerMsg};
use super::periodic::{Next, Round};
use super::probe_timing::{judge, timed_probe};
use crate::config::{HealthConfig, ms};
use crate::http_client::FetchError;

pub(crate) struct Prober;

pub(crate) struct ProberArgs {
    pub child: ChildArgs,
    /// Results from an earlier prober (a previous overload episode) are told apart by this.
    pub generation: u64,
}

impl Round for Prober {
    type Arguments = ProberArgs;
    type State = ProberArgs;

    fn start(args: ProberArgs) -> (ProberArgs, Option<Duration>) {
        // The first probe waits one period: the worker was just found overloaded.
        let period = ms(args.child.handle.config.load().prober.interval_ms);
        (args, Some(period))
    }

    async fn round(state: &mut ProberArgs) -> Next {
        let config = state.child.handle.config.load();
        let result = probe(&state.child, &config).await;
        let _ = state.child.supervisor.send_message(WorkerMsg::Probe {
            generation: state.generation,
            result,
        });
        Next::Every(ms(config.prober.interval_ms))
    }
}

async fn probe(args: &ChildArgs, config: &HealthConfig) -> ProbeResult {
    let handle = &args.handle;
    let worker = handle.name();
    let Some(model) = handle.models().and_then(|m| m.first().cloned()) else {
        debug!(worker, "no model known to probe with");
        return ProbeResult::Error;
    };
    let body = serde_json::json!({
        "model": model,
        "prompt": config.prober.prompt,
        "max_tokens": config.prober.max_tokens,
        "stream": true,
    });
    let request = handle
        .uri_for(&config.prober.path)
        .map_err(|e| e.to_string())
        .and_then(|uri| {
            Request::builder()
                .method(Method::POST)
                .uri(uri)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header_names::PURPOSE, Purpose::Probe.as_str())
                .body(Full::new(Bytes::from(body.to_string())))
                .map_err(|e| e.to_string())
        });
    let request = match request {
        Ok(request) => request,
        Err(error) => {
            debug!(worker, %error, "cannot build probe request");
            return ProbeResult::Error;
        }
    };
    let bound = ms(config.prober.latency_bound_ms);
    match timed_probe(&args.client, request, bound).await {
        Ok(Ok(timing)) => {
            let verdict = judge(timing, config);
            debug!(worker, ?timing, ?verdict, "probe answered");
            verdict
        }
        Ok(Err(status)) => {
            debug!(worker, %status, "probe failed");
            ProbeResult::Error
        }
        Err(FetchError::Timeout(_)) => ProbeResult::Timeout,
        Err(error) => {
            debug!(worker, %error, "probe failed");
            ProbeResult::Error
        }
    }
}
