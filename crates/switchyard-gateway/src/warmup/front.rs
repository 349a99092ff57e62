//! The request path's part, between parsing and admission: the degradation verdict for the
//! caller (the gateway-wide level, made stricter only by this caller's own budget), the model
//! downgrade chain (with prompt normalisation and disclosure), the cache fallback (as SSE for
//! streaming requests) and the friendly error, then lazy (L2) warmup of the resources the
//! request needs; after the worker answered, `note_use` (hit accounting) and, when the
//! response ends, `note_spend` and the response-cache fill (streamed answers assembled from
//! their deltas).

use axum::Json;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use std::sync::Arc;
use switchyard_core::RequestTags;
use switchyard_warmup::degradation::CallerSignals;
use switchyard_warmup::downgrade::{
    CachedAnswer, FRESH_HEADER, Notice, completion_from_sse, normalise_chat, sse_from_completion,
};
use switchyard_warmup::{
    CacheKey, CacheLookup, DegradationConfig, DowngradeRequest, DowngradeStep, Verdict,
    degraded_headers, friendly_error, plan_downgrade,
};

use super::request_text::RequestText;
use super::{WarmupRuntime, has_routable_worker};
use crate::error::ApiError;
use crate::openai::{self, ParsedRequest, Route};
use crate::proxy::WORKER_HEADER;
use crate::proxy::finish::FinishHook;
use crate::proxy::forward::RequestContext;

/// Largest answer copied for the response cache (the cache itself keeps less per shard);
/// also the bound on the text assembled from a streamed answer.
const MAX_CAPTURE_BYTES: usize = 4 << 20;
/// Largest streamed answer copied for the response cache: SSE framing costs several times
/// the text (a JSON chunk per token), and every open stream holds its copy until it ends.
const MAX_STREAM_CAPTURE_BYTES: usize = 1 << 20;

pub(crate) enum Plan {
    /// Answered here: the cache fallback or the friendly error.
    Answer(Response),
    /// Goes on to admission and a worker, as planned.
    Forward(Box<Planned>),
}

pub(crate) struct Planned {
    pub(crate) tags: RequestTags,
    pub(crate) parsed: ParsedRequest,
    pub(crate) bytes: Bytes,
    disclosure: Vec<(&'static str, String)>,
    /// Plain prompt text, when warmup resources are configured (to match them).
    text: Option<String>,
    cache_key: Option<CacheKey>,
}

pub(crate) async fn plan(
    ctx: &RequestContext<'_>,
    mut tags: RequestTags,
    parsed: ParsedRequest,
    bytes: Bytes,
) -> Result<Plan, ApiError> {
    let state = ctx.state;
    let runtime = &state.warmup;
    let view = runtime.view.load_full();
    let degradation = runtime.controller.config();
    let caller = CallerSignals {
        water_level: state.admission.caller_water_level(&tags),
        lowest_served: state.admission.lowest_served_priority(),
    };
    let decision = view.allows_for(&tags, &caller, &degradation);
    let verdict = decision.verdict;
    if decision.caller_level > view.level {
        tracing::debug!(
            caller_level = %decision.caller_level,
            ?verdict,
            "the caller's own budget degrades its request"
        );
    }
    runtime
        .metrics
        .verdicts
        .with_label_values(&[verdict_label(verdict)])
        .inc();
    let alias = parsed.model.clone();
    let mut request = RequestText::new(ctx.route, bytes.clone()).for_caller(&tags.caller);
    match verdict {
        Verdict::Fallback => {
            record(runtime, &DowngradeStep::FriendlyError);
            return Ok(Plan::Answer(friendly(ctx, &degradation, &alias, &tags)));
        }
        Verdict::ServeAt(priority) => tags.priority = priority,
        Verdict::Serve | Verdict::CachedOrWarmedOnly => {}
    }
    if decision.cache_first && degradation.cache.enabled && caches(&degradation, &alias) {
        if let Some(answer) = cached_answer(ctx, runtime, &parsed, &mut request) {
            return Ok(Plan::Answer(answer));
        }
    }
    let (parsed, bytes, disclosure) = if degradation.chain(&alias).is_some()
        || verdict == Verdict::CachedOrWarmedOnly
    {
        let wanted = DowngradeRequest {
            alias: &alias,
            skip: decision.downgrade_skip,
            cache_only: false,
        };
        let mut step = plan_downgrade(&degradation, &wanted, |m| has_routable_worker(state, m));
        if verdict == Verdict::CachedOrWarmedOnly {
            let warm = match &step {
                DowngradeStep::Model { model, .. } => serves_warm(runtime, model, &mut request),
                _ => false,
            };
            if !warm {
                let cached = DowngradeRequest {
                    cache_only: true,
                    ..wanted
                };
                step = plan_downgrade(&degradation, &cached, |_| false);
            }
        }
        let model = match &step {
            DowngradeStep::Model { model, .. } => model.clone(),
            DowngradeStep::CacheFallback => {
                let answer =
                    cache_fallback(ctx, runtime, &degradation, &parsed, &tags, &mut request);
                return Ok(Plan::Answer(answer));
            }
            DowngradeStep::FriendlyError => {
                record(runtime, &step);
                return Ok(Plan::Answer(friendly(ctx, &degradation, &alias, &tags)));
            }
        };
        record(runtime, &step);
        if model == alias {
            (parsed, bytes, Vec::new())
        } else {
            let (parsed, bytes, notices) = retarget(ctx.route, &mut request, &model, &degradation)?;
            (parsed, bytes, degraded_headers(&step, &notices, None))
        }
    } else {
        (parsed, bytes, Vec::new())
    };
    let text = if state.config().warmup.resources.is_empty() {
        None
    } else {
        Some(request.text().to_string())
    };
    if let Some(text) = &text {
        for name in runtime.manager.resources_for(&parsed.model, text, None) {
            let outcome = runtime.manager.lazy_warm(&name).await;
            tracing::debug!(resource = %name, ?outcome, "lazy warmup");
        }
    }
    let cache_key = if degradation.cache.enabled && caches(&degradation, &alias) {
        request.cache_key(&alias)
    } else {
        None
    };
    Ok(Plan::Forward(Box::new(Planned {
        tags,
        parsed,
        bytes,
        disclosure,
        text,
        cache_key,
    })))
}

impl Planned {
    /// Books the settled spend by purpose and offers a successful answer to the response
    /// cache: a non-streaming body as is, a stream assembled from its SSE deltas (only a
    /// stream that finished with `[DONE]`; tool calls and oversized text are not cached).
    pub(crate) fn finish_hook(&self, runtime: &WarmupRuntime) -> FinishHook {
        let manager = runtime.manager.clone();
        let purpose = self.tags.purpose;
        let fill = self.cache_key.clone().map(|key| {
            (
                key,
                Arc::clone(&runtime.cache),
                Arc::clone(&runtime.metrics),
                self.parsed.model.clone(),
            )
        });
        let stream = self.parsed.stream;
        let limit = match (&fill, stream) {
            (None, _) => 0,
            (Some(_), true) => MAX_STREAM_CAPTURE_BYTES,
            (Some(_), false) => MAX_CAPTURE_BYTES,
        };
        FinishHook::new(limit, move |finished| {
            manager.note_spend(purpose, finished.tokens);
            let Some((key, cache, metrics, model)) = fill else {
                return;
            };
            let outcome = if !finished.status.is_success() || finished.incomplete {
                "not_ok"
            } else {
                let body = finished.body.and_then(|body| {
                    if stream {
                        completion_from_sse(&body, MAX_CAPTURE_BYTES)
                    } else {
                        String::from_utf8(body.to_vec()).ok()
                    }
                });
                match body {
                    Some(body) => {
                        cache.insert(key, &model, body);
                        "stored"
                    }
                    _ => "not_captured",
                }
            };
            metrics.cache_fills.with_label_values(&[outcome]).inc();
        })
    }

    /// Adds the downgrade disclosure and tells warmup which resources the answer used.
    pub(crate) fn disclose(
        &self,
        ctx: &RequestContext<'_>,
        runtime: &WarmupRuntime,
        response: &mut Response,
    ) {
        let headers = response.headers_mut();
        for (name, value) in &self.disclosure {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(*name, value);
            }
        }
        let Some(text) = &self.text else {
            return;
        };
        if !response.status().is_success() {
            return;
        }
        let worker = response
            .headers()
            .get(WORKER_HEADER)
            .and_then(|v| v.to_str().ok());
        let latency = ctx.started.elapsed();
        for name in runtime
            .manager
            .resources_for(&self.parsed.model, text, worker)
        {
            runtime.manager.note_use(&name, Some(latency));
        }
    }
}

pub(crate) fn verdict_label(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Serve => "serve",
        Verdict::ServeAt(_) => "serve_at",
        Verdict::CachedOrWarmedOnly => "cached_or_warmed_only",
        Verdict::Fallback => "fallback",
    }
}

fn record(runtime: &WarmupRuntime, step: &DowngradeStep) {
    runtime.metrics.downgrades.record(step);
}

/// Whether answers for `alias` go to the response cache (its chain has the cache fallback;
/// a model without a chain always may, for level 3).
fn caches(config: &DegradationConfig, alias: &str) -> bool {
    config.chain(alias).is_none_or(|chain| chain.cache_fallback)
}

/// A warm warmup resource of `model` serves this request.
fn serves_warm(runtime: &WarmupRuntime, model: &str, request: &mut RequestText) -> bool {
    let manager = &runtime.manager;
    manager
        .resources_for(model, request.text(), None)
        .iter()
        .any(|name| manager.is_warm(name) == Some(true))
}

/// The request rewritten for `model`: chat bodies normalised to its profile, completion
/// bodies with the model replaced.
fn retarget(
    route: Route,
    request: &mut RequestText,
    model: &str,
    degradation: &DegradationConfig,
) -> Result<(ParsedRequest, Bytes, Vec<Notice>), ApiError> {
    let body = request
        .value()
        .ok_or_else(|| ApiError::bad_request("invalid_request", "the body is not a JSON object"))?;
    let (body, notices) = match route {
        Route::ChatCompletions => {
            let normalised = normalise_chat(body, model, degradation.profile(model))
                .map_err(|e| ApiError::bad_request("invalid_request", e.to_string()))?;
            (normalised.body, normalised.notices)
        }
        // The rest of the surface never reaches the downgrade chain (see `proxy::surface`);
        // were it to, the model is the one field every body names.
        _ => {
            let mut body = body.clone();
            body["model"] = json!(model);
            (body, Vec::new())
        }
    };
    let bytes =
        Bytes::from(serde_json::to_vec(&body).map_err(|e| ApiError::internal(e.to_string()))?);
    let parsed = openai::parse(route, &bytes)?;
    Ok((parsed, bytes, notices))
}

/// A cached answer when one may be served (not time-sensitive, young enough), as SSE for
/// a streaming request, else the friendly error.
fn cache_fallback(
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
fn cached_answer(
    ctx: &RequestContext<'_>,
    runtime: &WarmupRuntime,
    parsed: &ParsedRequest,
    request: &mut RequestText,
) -> Option<Response> {
    let fresh = ctx
        .client_headers
        .get(FRESH_HEADER)
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

/// The last link of every chain: an OpenAI-shaped 503 the client can show as is, with the
/// admission layer's jittered `Retry-After` for this client's own retry count.
pub(crate) fn friendly(
    ctx: &RequestContext<'_>,
    degradation: &DegradationConfig,
    alias: &str,
    tags: &RequestTags,
) -> Response {
    let error = friendly_error(degradation, alias);
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    count(ctx, status, "none");
    let retry = switchyard_admission::retry_after(
        &ctx.state.admission.config().retry_after,
        switchyard_admission::exponent(tags.client_retry, None),
        &mut rand::rng(),
    );
    let mut response = (status, Json(error.body)).into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(retry.as_secs_f64().ceil() as u64),
    );
    response
}

fn count(ctx: &RequestContext<'_>, status: StatusCode, answered_by: &str) {
    ctx.state
        .metrics
        .requests
        .with_label_values(&[ctx.route.label(), status.as_str(), answered_by])
        .inc();
}
