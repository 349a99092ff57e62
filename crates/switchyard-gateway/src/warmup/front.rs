//! The request path's part, between parsing and admission: the degradation verdict for the
//! caller, the model downgrade chain (with prompt normalisation and disclosure), the cache
//! fallback and the friendly error, then lazy (L2) warmup of the resources the request needs;
//! after the worker answered, `note_use` (hit accounting) and, when the response ends,
//! `note_spend` and the response-cache fill.

use axum::Json;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, StatusCode, header};
use serde_json::json;
use std::sync::Arc;
use switchyard_core::RequestTags;
use switchyard_warmup::downgrade::{CachedAnswer, FRESH_HEADER, Notice, normalise_chat};
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

/// Largest answer copied for the response cache (the cache itself keeps less per shard).
const MAX_CAPTURE_BYTES: usize = 4 << 20;

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
    let verdict = view.allows(&tags);
    runtime
        .metrics
        .verdicts
        .with_label_values(&[verdict_label(verdict)])
        .inc();
    let degradation = runtime.controller.config();
    let alias = parsed.model.clone();
    let mut request = RequestText::new(ctx.route, bytes.clone());
    match verdict {
        Verdict::Fallback => {
            record(runtime, &DowngradeStep::FriendlyError);
            return Ok(Plan::Answer(friendly(ctx, &degradation, &alias)));
        }
        Verdict::ServeAt(priority) => tags.priority = priority,
        Verdict::Serve | Verdict::CachedOrWarmedOnly => {}
    }
    let (parsed, bytes, disclosure) = if degradation.chain(&alias).is_some()
        || verdict == Verdict::CachedOrWarmedOnly
    {
        let wanted = DowngradeRequest {
            alias: &alias,
            skip: view.downgrade_skip(&tags),
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
                let answer = cache_fallback(ctx, runtime, &degradation, &parsed, &mut request);
                return Ok(Plan::Answer(answer));
            }
            DowngradeStep::FriendlyError => {
                record(runtime, &step);
                return Ok(Plan::Answer(friendly(ctx, &degradation, &alias)));
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
    let cache_key = if degradation.cache.enabled && !parsed.stream && caches(&degradation, &alias) {
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
    /// Books the settled spend by purpose and offers a successful non-streaming answer to
    /// the response cache.
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
        let limit = if fill.is_some() { MAX_CAPTURE_BYTES } else { 0 };
        FinishHook::new(limit, move |finished| {
            manager.note_spend(purpose, finished.tokens);
            let Some((key, cache, metrics, model)) = fill else {
                return;
            };
            let outcome = if !finished.status.is_success() || finished.incomplete {
                "not_ok"
            } else {
                match finished.body.map(|body| String::from_utf8(body.to_vec())) {
                    Some(Ok(body)) => {
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

fn verdict_label(verdict: Verdict) -> &'static str {
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
        Route::Completions => {
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

/// A cached answer when one may be served (not time-sensitive, not a stream, young
/// enough), else the friendly error.
fn cache_fallback(
    ctx: &RequestContext<'_>,
    runtime: &WarmupRuntime,
    degradation: &DegradationConfig,
    parsed: &ParsedRequest,
    request: &mut RequestText,
) -> Response {
    let fresh = ctx
        .client_headers
        .get(FRESH_HEADER)
        .and_then(|v| v.to_str().ok());
    let alias = parsed.model.as_str();
    let lookup = match request.cache_key(alias) {
        Some(key) if !parsed.stream => Some(runtime.cache.lookup(&key, request.text(), fresh)),
        _ => None,
    };
    match lookup {
        Some(CacheLookup::Hit { answer, age }) => {
            let step = DowngradeStep::CacheFallback;
            record(runtime, &step);
            cached(ctx, &answer, degraded_headers(&step, &[], Some(age)))
        }
        _ => {
            record(runtime, &DowngradeStep::FriendlyError);
            friendly(ctx, degradation, alias)
        }
    }
}

fn cached(
    ctx: &RequestContext<'_>,
    answer: &CachedAnswer,
    disclosure: Vec<(&'static str, String)>,
) -> Response {
    count(ctx, StatusCode::OK, "cache");
    let mut response = (
        [(header::CONTENT_TYPE, "application/json")],
        answer.body.clone(),
    )
        .into_response();
    let headers = response.headers_mut();
    for (name, value) in disclosure {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

/// The last link of every chain: an OpenAI-shaped 503 the client can show as is, with the
/// admission layer's jittered `Retry-After`.
fn friendly(ctx: &RequestContext<'_>, degradation: &DegradationConfig, alias: &str) -> Response {
    let error = friendly_error(degradation, alias);
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    count(ctx, status, "none");
    let retry = switchyard_admission::retry_after(
        &ctx.state.admission.config().retry_after,
        0,
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
