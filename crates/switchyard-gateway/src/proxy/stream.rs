//! Stream: the worker's answer handed to the client through the metered body — frame by
//! frame, never buffered — with the worker's name added and hop-by-hop headers dropped. A
//! stream whose client did not ask for usage has the usage chunk (asked for on its behalf,
//! to bill it) removed on the way back.

use axum::body::Body;
use axum::response::Response;
use http::{HeaderName, header};
use std::sync::Arc;
use std::time::Duration;
use switchyard_admission::AdmissionPermit;
use switchyard_workers::CallOutcome;

use super::attempt::{UpstreamResponse, is_event_stream};
use super::context::RequestContext;
use super::metered_body::{GatewayInFlight, MeteredBody, ResponseMeter};
use super::settle::FinishHook;
use super::usage_stream;
use crate::headers;

/// Upstream response headers that describe the connection, not the content.
const HOP_BY_HOP: &[HeaderName] = &[
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::CONTENT_LENGTH,
    header::UPGRADE,
    header::TE,
    header::TRAILER,
    header::PROXY_AUTHENTICATE,
];

/// Turns the worker's answer into the client's response, streamed through a metered body.
pub(super) fn respond(
    ctx: &RequestContext<'_>,
    upstream: UpstreamResponse,
    gateway_in_flight: GatewayInFlight,
    permit: AdmissionPermit,
    on_finish: Option<FinishHook>,
    hide_usage: bool,
) -> Response {
    let UpstreamResponse {
        parts,
        body,
        first_chunk,
        worker,
        in_flight,
        sent_at,
        prompt_tokens,
    } = upstream;
    let metrics = &ctx.stack.metrics;
    metrics
        .requests
        .with_label_values(&[ctx.route.label(), parts.status.as_str(), worker.name()])
        .inc();
    let is_sse = is_event_stream(&parts.headers);
    if !is_sse {
        // A non-streaming worker sends its headers only when generation ends, so this
        // duration says nothing about slowness to first token; the latency collector judges
        // that. For the breaker it is a success.
        worker.record_outcome(CallOutcome::Success {
            ttfb: Duration::ZERO,
        });
    }
    let meter = ResponseMeter {
        metrics: Arc::clone(metrics),
        route: ctx.route,
        started: ctx.started,
        _worker_in_flight: in_flight,
        _gateway_in_flight: gateway_in_flight,
        permit: Some(permit),
        sent_at,
        status: parts.status,
        on_finish,
        prompt_tokens,
        _span: tracing::debug_span!(
            "stream",
            worker = worker.name(),
            status = parts.status.as_u16(),
            sse = is_sse
        ),
    };
    let idle_timeout = ctx.stack.config().upstream.stream_idle_timeout();
    let metered = MeteredBody::new(body, meter, is_sse)
        .with_first_chunk(first_chunk)
        .with_idle_timeout(idle_timeout);
    let mut response = Response::new(Body::new(metered));
    *response.status_mut() = parts.status;
    let headers = response.headers_mut();
    for (name, value) in &parts.headers {
        if !HOP_BY_HOP.contains(name) {
            headers.append(name, value.clone());
        }
    }
    if let Some(value) = worker.name_header() {
        headers.insert(headers::WORKER, value.clone());
    }
    if hide_usage {
        usage_stream::strip_usage_chunk(response)
    } else {
        response
    }
}
