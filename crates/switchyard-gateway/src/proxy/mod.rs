//! The inference request path, one stage per module, assembled here in order:
//! read body → parse → (select worker → forward, retried on another worker) → meter the
//! streamed response. Later stages (admission, prefilters) slot in as their own modules.

pub mod body_budget;
mod body_limit;
pub mod deadline;
pub mod finish;
pub(crate) mod forward;
mod metered_body;
mod retry;
pub mod retry_budget;
pub mod select;
mod surface;
mod usage;
mod usage_stream;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use std::time::Instant;
use switchyard_core::RequestTags;
use tracing::Instrument;

use crate::error::ApiError;
use crate::openai::{self, Route};
use crate::state::SharedState;

pub use metered_body::GatewayInFlight;

pub const REQUEST_ID_HEADER: &str = "x-request-id";
pub const WORKER_HEADER: &str = "x-switchyard-worker";

/// Serves one OpenAI inference request end to end. Never panics on input; every failure
/// becomes an OpenAI-shaped error response.
pub async fn handle(state: SharedState, route: Route, headers: HeaderMap, body: Body) -> Response {
    handle_at(state, route, route.path(), headers, body).await
}

/// [`handle`] for a request forwarded to the worker at `upstream_path` (the client's own
/// path and query: `/rerank` and `/v2/rerank` stay what they were, pass-through keeps its path).
pub async fn handle_at(
    state: SharedState,
    route: Route,
    upstream_path: &str,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let request_id = request_id(&headers);
    let span = tracing::info_span!(
        "request",
        request_id = %request_id,
        route = route.label(),
        caller = tracing::field::Empty
    );
    async move {
        let started = Instant::now();
        let in_flight = GatewayInFlight::enter(&state.metrics);
        let ctx = forward::RequestContext {
            state: &state,
            route,
            upstream_path,
            client_headers: &headers,
            request_id: &request_id,
            started,
        };
        let mut response = match serve(&ctx, body, in_flight).await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(status = error.status.as_u16(), code = error.code, message = %error.message, "request refused");
                state
                    .metrics
                    .requests
                    .with_label_values(&[route.label(), error.status.as_str(), "none"])
                    .inc();
                error.into_response()
            }
        };
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            response.headers_mut().insert(REQUEST_ID_HEADER, value);
        }
        response
    }
    .instrument(span)
    .await
}

/// Output tokens assumed for the budget estimate when a request sets no `max_tokens`.
const DEFAULT_OUTPUT_ESTIMATE: u64 = 256;

async fn serve(
    ctx: &forward::RequestContext<'_>,
    body: Body,
    in_flight: GatewayInFlight,
) -> Result<Response, ApiError> {
    if !ctx.route.is_generation() {
        return surface::serve(ctx, body, in_flight).await;
    }
    let admission = &ctx.state.admission;
    // Identity first: an unknown caller is refused before its body is even read.
    let tags = admission
        .resolve(ctx.client_headers)
        .map_err(ApiError::refused)?;
    tracing::Span::current().record("caller", &*tags.caller);
    let (limit, deadline) = {
        let config = ctx.state.config();
        (
            config.server.max_body_bytes,
            config.listener.body_read_timeout(),
        )
    };
    // Held until the response headers are out: the body waits for admission inside it.
    let (bytes, _held_body) = body_limit::read(
        ctx.client_headers,
        body,
        limit,
        &ctx.state.pending_bodies,
        deadline,
    )
    .await?;
    let parsed = openai::parse(ctx.route, &bytes)?;
    parsed.check_max_tokens(ctx.state.config().limits.max_output_tokens)?;
    if let Some(context) = model_context(ctx.state, &parsed.model) {
        parsed.check_max_tokens(context)?;
    }
    // Degradation verdict, downgrade chain, cache fallback, lazy warmup (issue 7).
    let planned = match crate::warmup::front::plan(ctx, tags, parsed, bytes).await? {
        crate::warmup::front::Plan::Answer(response) => return Ok(response),
        crate::warmup::front::Plan::Forward(planned) => planned,
    };
    let warmup = &ctx.state.warmup;
    let on_finish = Some(planned.finish_hook(warmup));
    let (tags, parsed, bytes) = (&planned.tags, &planned.parsed, planned.bytes.clone());
    let mut response = dispatch(ctx, tags, parsed, bytes, in_flight, on_finish).await?;
    planned.disclose(ctx, warmup, &mut response);
    Ok(response)
}

/// Admission, then the worker (selected, retried) and the metered response: the stack every
/// request whose tags and body are settled goes through, business and warmup alike.
pub(crate) async fn dispatch(
    ctx: &forward::RequestContext<'_>,
    tags: &RequestTags,
    parsed: &openai::ParsedRequest,
    bytes: Bytes,
    in_flight: GatewayInFlight,
    on_finish: Option<finish::FinishHook>,
) -> Result<Response, ApiError> {
    let estimate = parsed.estimated_tokens(DEFAULT_OUTPUT_ESTIMATE);
    let mut permit = ctx
        .state
        .admission
        .admit(tags, estimate)
        .await
        .map_err(ApiError::refused)?;
    // A stream is billed by the usage its worker reports, so the worker is always asked for
    // it; a client that did not ask does not see it. (Chat and completions only: the rest of
    // the surface is forwarded as it is; Responses streams always end with their usage.)
    let hide_usage = ctx.route.is_generation() && parsed.stream && !parsed.include_usage;
    let bytes = match hide_usage.then(|| usage_stream::ask_for_usage(&bytes)) {
        Some(Some(asked)) => asked,
        _ => bytes,
    };
    match retry::send_with_retries(ctx, parsed, bytes, tags).await {
        Ok(upstream) => {
            let response = forward::respond(ctx, upstream, in_flight, permit, on_finish);
            Ok(if hide_usage {
                usage_stream::strip_usage_chunk(response)
            } else {
                response
            })
        }
        Err(error) => {
            if error.status.is_server_error() {
                permit.mark_failed();
            }
            // Nothing was served: nothing is spent.
            permit.settle(0);
            Err(error)
        }
    }
}

/// The longest context among the workers serving `model`, when every one of them stated it
/// (`max_model_len` from `/v1/models`): no worker could generate more than that.
fn model_context(state: &crate::state::AppState, model: &str) -> Option<u64> {
    let workers = state.registry.directory().snapshot();
    let mut serving = workers
        .iter()
        .filter(|w| {
            w.models()
                .is_some_and(|m| m.iter().any(|name| name == model))
        })
        .peekable();
    serving.peek()?;
    serving
        .map(|w| w.max_model_len())
        .try_fold(0u64, |longest, len| len.map(|len| longest.max(len)))
}

/// The caller's request id when it sent a usable one, else a fresh UUID.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}
