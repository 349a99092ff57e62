//! The inference request path. Every stage is a module with one job, called in order here:
//!
//! 1. `identity` — API key → caller, priority, purpose (401/403 before the body is read);
//! 2. `body` — the bounded body read (413 / 408 / 503 over the held-bodies budget);
//! 3. `parse` — only what routing and budgets need (400 past the output-token limits, or
//!    when no worker's context holds the prompt and output: `context_fit`);
//! 4. `degrade` — the degradation verdict: lowered priority, downgrade chain, cache answer
//!    or friendly error, then lazy warmup;
//! 5. `admit` — budget, rate, concurrency and the priority queue; the permit is held to the end;
//! 6. `select` — the workers whose context fits, prefilters, then the routing policy (asked
//!    again on each retry);
//! 7. `retry` + `attempt` — an attempt per worker until one answers its first byte in time,
//!    retried on another worker within the retry budget; an engine's 4xx in OpenAI's shape
//!    (`engine_error`);
//! 8. `stream` — the worker's body to the client through the metered body;
//! 9. `settle` — at the end: the permit settled with the real usage, spend booked by purpose,
//!    the response cache filled; the degradation disclosure on the answer.
//!
//! Warmups enter at [`dispatch_warmup`] (stage 5) with their own tags and body. The stages
//! 5 to 8 run in `admit`, `select`, `attempt` and `stream` spans under the `request` span
//! (exported over OTLP when `--otlp-endpoint` is set: `telemetry`).

mod admit;
mod attempt;
mod body;
pub mod body_budget;
mod context;
mod context_fit;
pub mod deadline;
mod degrade;
mod engine_error;
mod identity;
mod in_span;
mod metered_body;
mod parse;
mod retry;
pub mod retry_budget;
pub mod select;
mod settle;
mod stream;
mod usage;
mod usage_stream;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};
use std::time::Instant;
use switchyard_core::RequestTags;

use self::context::RequestContext;
use self::degrade::Plan;
use self::metered_body::GatewayInFlight;
use self::select::Selector;
use self::settle::FinishHook;
use crate::error::ApiError;
use crate::headers;
use crate::openai::{ParsedRequest, Route};
use crate::state::{AppState, SharedState, Stack};
use crate::trace_context::TraceContext;

/// Serves one OpenAI inference request end to end. Never panics on input; every failure
/// becomes an OpenAI-shaped error response.
pub async fn handle(state: SharedState, route: Route, headers: HeaderMap, body: Body) -> Response {
    handle_at(state, route, &Method::POST, route.path(), headers, body).await
}

/// [`handle`] for a request forwarded to the worker at `upstream_path` (the client's own
/// path and query: `/rerank` and `/v2/rerank` stay what they were, pass-through keeps its path)
/// with the client's `method` (pass-through also takes `GET` and `DELETE`).
pub async fn handle_at(
    state: SharedState,
    route: Route,
    method: &Method,
    upstream_path: &str,
    client_headers: HeaderMap,
    body: Body,
) -> Response {
    let request_id = request_id(&client_headers);
    let trace = TraceContext::for_request(&client_headers, &request_id);
    // Resolved before the span, so the caller is one of its fields from the start: recorded
    // afterwards, it would cost a second trip through the subscriber. A refused request's
    // span has no caller.
    let tags = identity::resolve(&state.stack, &client_headers);
    let caller = tags.as_ref().ok().map(|tags| &*tags.caller);
    // The trace ids are read by the OTLP exporter (`telemetry`). Without one they go into the
    // log lines only when the client sent its own trace context: otherwise the trace id is the
    // request id again, and formatting two more fields is a measurable share of the request.
    // Fields print in the order declared here (`caller` last, as when it was recorded later).
    let span = if crate::telemetry::exports_spans() || trace.is_from_client() {
        tracing::info_span!(
            "request",
            request_id = %request_id,
            route = route.label(),
            status = tracing::field::Empty,
            trace_id = %trace.trace_id,
            parent_span_id = %trace.parent_id,
            caller,
        )
    } else {
        tracing::info_span!(
            "request",
            request_id = %request_id,
            route = route.label(),
            status = tracing::field::Empty,
            caller,
        )
    };
    let serve_request = async move {
        let ctx = RequestContext {
            stack: &state.stack,
            route,
            method,
            upstream_path,
            client_headers: &client_headers,
            request_id: &request_id,
            trace: &trace,
            started: Instant::now(),
        };
        let in_flight = GatewayInFlight::enter(&state.stack.metrics);
        // On the heap: the stages' state is several kilobytes, and every future that holds
        // it inline (this one, the span's, the listener's) is copied whole each time it moves.
        let mut response = match Box::pin(serve(&state, &ctx, tags, body, in_flight)).await {
            Ok(response) => response,
            Err(error) => refused(&ctx, error),
        };
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            response.headers_mut().insert(headers::REQUEST_ID, value);
        }
        // The span's status is the exported span's outcome; log lines after this point (a
        // stream that breaks) are rare, so it is recorded only for the exporter.
        if crate::telemetry::exports_spans() {
            tracing::Span::current().record("status", response.status().as_u16());
        }
        response
    };
    in_span::in_span(span, serve_request).await
}

/// The stages, in order.
async fn serve(
    state: &AppState,
    ctx: &RequestContext<'_>,
    tags: Result<RequestTags, ApiError>,
    body: Body,
    in_flight: GatewayInFlight,
) -> Result<Response, ApiError> {
    let tags = tags?;
    // Held until the response's headers are out: the body waits for admission inside it.
    let (bytes, _held_body) = body::read_request(ctx, &state.pending_bodies, body).await?;
    let (parsed, key_inputs) = parse::parse(ctx, &bytes)?;
    let planned = match degrade::plan(state, ctx, tags, parsed, key_inputs, bytes).await? {
        Plan::Answered(response) => return Ok(response),
        Plan::Forward(planned) => planned,
    };
    let on_finish = settle::hook(&state.warmup, &planned);
    let (tags, parsed) = (&planned.tags, &planned.parsed);
    let bytes = planned.bytes.clone();
    let mut response = dispatch(ctx, tags, parsed, bytes, in_flight, Some(on_finish)).await?;
    settle::disclose(&state.warmup, ctx, &planned, &mut response);
    Ok(response)
}

/// Stages 5 to 8 for a request whose tags and body are settled: business requests after
/// `degrade`, and warmups sent through the same stack.
async fn dispatch(
    ctx: &RequestContext<'_>,
    tags: &RequestTags,
    parsed: &ParsedRequest,
    bytes: Bytes,
    in_flight: GatewayInFlight,
    on_finish: Option<FinishHook>,
) -> Result<Response, ApiError> {
    let permit = admit::admit(ctx, tags, parsed).await?;
    // A stream is billed by the usage its worker reports, so the worker is always asked for
    // it; a client that did not ask does not see it.
    let (bytes, hide_usage) = usage_stream::ask_unless_asked(ctx.route, parsed, bytes);
    let selector = Selector::new(ctx, parsed);
    let upstream = match retry::send_with_retries(ctx, &selector, parsed, bytes, tags).await {
        Ok(upstream) => upstream,
        Err(error) => return Err(admit::unserved(permit, error)),
    };
    Ok(stream::respond(
        ctx, upstream, in_flight, permit, on_finish, hide_usage,
    ))
}

/// A warmup request through stages 5 to 8, as the gateway's own caller: `tags` name the
/// warmup's caller, purpose and priority; `client_headers` carry its routing-key inputs
/// (session); `started` is when the gateway's latency histograms start timing it.
pub async fn dispatch_warmup(
    stack: &Stack,
    tags: &RequestTags,
    parsed: &ParsedRequest,
    bytes: Bytes,
    client_headers: &HeaderMap,
    request_id: &str,
    started: Instant,
) -> Result<Response, ApiError> {
    let route = Route::ChatCompletions;
    let trace = TraceContext::for_request(client_headers, request_id);
    let ctx = RequestContext {
        stack,
        route,
        method: &Method::POST,
        upstream_path: route.path(),
        client_headers,
        request_id,
        trace: &trace,
        started,
    };
    let in_flight = GatewayInFlight::enter(&stack.metrics);
    dispatch(&ctx, tags, parsed, bytes, in_flight, None).await
}

/// Counts a refused request and turns the error into its response.
fn refused(ctx: &RequestContext<'_>, error: ApiError) -> Response {
    tracing::debug!(status = error.status.as_u16(), code = error.code, message = %error.message, "request refused");
    ctx.stack
        .metrics
        .requests
        .with_label_values(&[ctx.route.label(), error.status.as_str(), "none"])
        .inc();
    error.into_response()
}

/// The caller's request id when it sent a usable one, else a fresh UUID.
fn request_id(client_headers: &HeaderMap) -> String {
    client_headers
        .get(headers::REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_string)
        .unwrap_or_else(|| {
            // What `to_string` prints, written without the formatting machinery.
            let mut text = uuid::Uuid::encode_buffer();
            String::from(&*fresh_request_id().hyphenated().encode_lower(&mut text))
        })
}

/// A random (v4) UUID from the thread's generator: `Uuid::new_v4` asks the kernel for
/// entropy, a system call on every request.
fn fresh_request_id() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_request_id_prints_as_its_uuid_does() {
        let id = request_id(&HeaderMap::new());
        let uuid = uuid::Uuid::parse_str(&id).unwrap();
        assert_eq!(id, uuid.to_string());
        assert_eq!(uuid.get_version_num(), 4);
        assert_ne!(id, request_id(&HeaderMap::new()));
    }
}
