//! The response cache on the request path: whether a model's answers are cached, and a
//! cached answer served in place of a worker's (replayed as SSE for a streaming request).

use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use switchyard_core::RequestTags;
use switchyard_core::header_names;
use switchyard_warmup::downgrade::{CachedAnswer, sse_from_completion};
use switchyard_warmup::{CacheLookup, DegradationConfig, DowngradeStep, degraded_headers};

use super::answer::{count, friendly, record};
use super::request_text::RequestText;
use crate::openai::ParsedRequest;
use crate::proxy::context::RequestContext;
use crate::state::WarmupRuntime;

/// Whether answers for `alias` go to the response cache (its chain has the cache fallback;
/// a model without a chain always may, for level 3).
pub(super) fn caches(config: &DegradationConfig, alias: &str) -> bool {
    config.chain(alias).is_none_or(|chain| chain.cache_fallback)
}

/// A cached answer when one may be served (not time-sensitive, young enough), as SSE for
/// a streaming request, else the friendly error.
pub(super) fn cache_fallback(
    ctx: &RequestContext<'_>,
    runtime: &WarmupRuntime,
    degradation: &DegradationConfig,
    parsed: &ParsedRequest,
    tags: &RequestTags,
    request: &mut RequestText,
) -> Response {
    match cached_answer(ctx, runtime, parsed, request) {
        Some(answer) => answer,
        None => {
            record(runtime, &DowngradeStep::FriendlyError);
            friendly(ctx, degradation, parsed.model.as_str(), tags)
        }
    }
}

/// The cached answer to this request when one may be served (not time-sensitive, young
/// enough): the stored completion, or replayed as SSE for a streaming request.
pub(super) fn cached_answer(
    ctx: &RequestContext<'_>,
    runtime: &WarmupRuntime,
    parsed: &ParsedRequest,
    request: &mut RequestText,
) -> Option<Response> {
    let fresh = ctx
        .client_headers
        .get(header_names::FRESH)
        .and_then(|v| v.to_str().ok());
    let lookup = request
        .cache_key(parsed.model.as_str())
        .map(|key| runtime.cache.lookup(&key, request.text(), fresh));
    let hit = match lookup {
        Some(CacheLookup::Hit { answer, age }) => {
            let body = if parsed.stream {
                sse_from_completion(&answer.body).map(|sse| (sse, "text/event-stream"))
            } else {
                Some((answer.body.clone(), "application/json"))
            };
            body.map(|body| (answer, age, body))
        }
        _ => None,
    };
    let (answer, age, (body, content_type)) = hit?;
    let step = DowngradeStep::CacheFallback;
    record(runtime, &step);
    let disclosure = degraded_headers(&step, &[], Some(age));
    Some(cached(ctx, &answer, body, content_type, disclosure))
}

fn cached(
    ctx: &RequestContext<'_>,
    answer: &CachedAnswer,
    body: String,
    content_type: &'static str,
    disclosure: Vec<(&'static str, String)>,
) -> Response {
    count(ctx, StatusCode::OK, "cache");
    tracing::debug!(model = %answer.model, content_type, "answered from the response cache");
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    let headers = response.headers_mut();
    for (name, value) in disclosure {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}
