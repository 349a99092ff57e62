//! Answers the degrade stage gives itself — the friendly error — and its counters.

use axum::Json;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use switchyard_core::RequestTags;
use switchyard_warmup::{DegradationConfig, DowngradeStep, Verdict, friendly_error};

use crate::metrics::degradation::VERDICTS;
use crate::proxy::context::RequestContext;
use crate::state::WarmupRuntime;

pub(super) fn count_verdict(runtime: &WarmupRuntime, verdict: Verdict) {
    let index = match verdict {
        Verdict::Serve => 0,
        Verdict::ServeAt(_) => 1,
        Verdict::CachedOrWarmedOnly => 2,
        Verdict::Fallback => 3,
    };
    runtime.metrics.verdicts.get(index, VERDICTS[index]).inc();
}

pub(super) fn record(runtime: &WarmupRuntime, step: &DowngradeStep) {
    runtime.metrics.downgrades.record(step);
}

/// The last link of every chain: an OpenAI-shaped 503 the client can show as is, with the
/// admission layer's jittered `Retry-After` for this client's own retry count.
pub(super) fn friendly(
    ctx: &RequestContext<'_>,
    degradation: &DegradationConfig,
    alias: &str,
    tags: &RequestTags,
) -> Response {
    let error = friendly_error(degradation, alias);
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    count(ctx, status, "none");
    let retry = switchyard_admission::retry_after(
        &ctx.stack.admission.config().retry_after,
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

/// Counts a request answered without a worker (`answered_by` is `cache` or `none`).
pub(super) fn count(ctx: &RequestContext<'_>, status: StatusCode, answered_by: &str) {
    ctx.stack
        .metrics
        .requests
        .with_label_values(&[ctx.route.label(), status.as_str(), answered_by])
        .inc();
}
