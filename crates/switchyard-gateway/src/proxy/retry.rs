//! Attempts a request on workers until one answers: on a connect failure, a 5xx, a missed
//! first-byte deadline or a timeout — all before any byte reached the client — retry on a
//! *different* worker, within `max_retries` and the retry budget, after an exponential
//! backoff with jitter. A response that has started streaming is never retried (it has
//! already been handed to the client). Retries of refused connects do not spend the budget:
//! nothing reached a worker, so they add no load beyond the request itself. An attempt
//! rescued from a worker taken out of routing moves on at once, spending neither the budget
//! nor `max_retries`: its worker is filtered, so the move adds no load, and each worker is
//! tried at most once.

use bytes::Bytes;
use http::HeaderValue;
use rand::Rng;
use switchyard_core::{Purpose, RequestTags, WorkerId};
use tracing::Instrument;

use super::attempt::{self, AttemptFailure, UpstreamResponse};
use super::context::RequestContext;
use super::deadline;
use super::retry_budget::RetryDenied;
use super::select::Selector;
use crate::error::ApiError;
use crate::headers;
use crate::openai::ParsedRequest;
use switchyard_workers::CallOutcome;

/// Runs the first attempt and any retries; returns the first usable upstream response.
pub(super) async fn send_with_retries(
    ctx: &RequestContext<'_>,
    selector: &Selector<'_>,
    request: &ParsedRequest,
    body: Bytes,
    tags: &RequestTags,
) -> Result<UpstreamResponse, ApiError> {
    let stack = ctx.stack;
    let budget = &stack.retry_budget;
    let metrics = &stack.metrics;
    budget.record_first_attempt();
    let config = stack.config();
    let mut tried: Vec<WorkerId> = Vec::new();
    let mut retries_spent = 0u32;
    let mut last_failure: Option<AttemptFailure> = None;
    let prompt_tokens = (request.prompt.len() as u64).div_ceil(4);
    loop {
        let selected =
            tracing::debug_span!("select", tried = tried.len()).in_scope(|| selector.next(&tried));
        let (worker, decision) = match selected {
            Ok(selected) => selected,
            // Nowhere else to go: the client learns why the last attempt failed.
            Err(error) => {
                return Err(match last_failure.take() {
                    Some(failure) => {
                        metrics
                            .retries_denied
                            .with_label_values(&["no_other_worker"])
                            .inc();
                        failure.into_api_error()
                    }
                    None => error,
                });
            }
        };
        if !worker.breaker_admits() {
            // Half-open and out of trial permits: treat like a filtered worker.
            metrics.breaker_rejections.inc();
            tried.push(worker.id());
            continue;
        }
        let is_retry = !tried.is_empty();
        let attempt_purpose = if is_retry {
            Purpose::Retry
        } else {
            tags.purpose
        };
        let (kind, label) = if is_retry { (1, "retry") } else { (0, "first") };
        metrics.upstream_attempts_by_kind.get(kind, label).inc();
        tracing::debug!(
            worker = worker.name(),
            branch = decision.branch,
            retry = is_retry,
            "routed"
        );
        // The request's tags travel to the worker (and survive retries, purpose aside).
        // On the stack: a caller that cannot be a header value is left out.
        let caller = HeaderValue::from_str(&tags.caller).ok();
        let count = if caller.is_some() { 3 } else { 2 };
        let tag_headers = [
            (
                headers::PURPOSE,
                HeaderValue::from_static(attempt_purpose.as_str()),
            ),
            (
                headers::PRIORITY,
                HeaderValue::from_static(tags.priority.as_str()),
            ),
            (
                headers::CALLER,
                caller.unwrap_or_else(|| HeaderValue::from_static("")),
            ),
        ];
        let tag_headers = &tag_headers[..count];
        let pace = deadline::WorkerPace::of(&worker);
        let first_byte_config = &config.upstream.first_byte;
        let first_byte = first_byte_config
            .deadline(&pace, request, prompt_tokens)
            .unwrap_or_else(|| config.upstream.request_timeout());
        let due = first_byte_config.bytes_due(&pace, request, prompt_tokens);
        // The attempt's span id is the parent the worker sees in `traceparent`.
        let span_id = crate::telemetry::SpanId::fresh();
        let span = tracing::debug_span!(
            "attempt",
            worker = worker.name(),
            branch = decision.branch,
            retry = is_retry,
            span_id = %span_id,
            error = tracing::field::Empty,
        );
        let attempt = attempt::attempt(
            ctx,
            &worker,
            body.clone(),
            tag_headers,
            (first_byte, due),
            span_id.as_str(),
        )
        .instrument(span.clone());
        let failure = match attempt.await {
            Ok(mut response) => {
                metrics.first_byte_in_time.inc();
                response.prompt_tokens = prompt_tokens;
                return Ok(response);
            }
            Err(failure) => failure,
        };
        span.record("error", failure.kind());
        metrics
            .upstream_errors
            .with_label_values(&[failure.kind()])
            .inc();
        tried.push(worker.id());
        if matches!(failure, AttemptFailure::Rescued { .. }) {
            // Its worker was filtered for its own reason; this call proves nothing more.
            worker.record_outcome(CallOutcome::Abandoned);
            metrics.first_byte.with_label_values(&["rescued"]).inc();
            tracing::info!(
                worker = worker.name(),
                "attempt rescued from a filtered worker"
            );
            last_failure = Some(failure);
            continue;
        }
        worker.record_outcome(CallOutcome::Failure);
        if matches!(failure, AttemptFailure::FirstByteDeadline { .. }) {
            metrics.first_byte.with_label_values(&["deadline"]).inc();
        }
        tracing::warn!(
            worker = worker.name(),
            kind = failure.kind(),
            "attempt failed"
        );
        let retries_so_far = retries_spent;
        if retries_so_far >= budget.config().max_retries {
            metrics
                .retries_denied
                .with_label_values(&["max_retries"])
                .inc();
            return Err(failure.into_api_error());
        }
        // A refused connect did no work on any worker, so retrying it amplifies nothing;
        // only retries of requests that reached a worker spend the budget.
        let spends_budget = !matches!(failure, AttemptFailure::Transport { connect: true, .. });
        let allowed = if spends_budget {
            budget.try_acquire()
        } else {
            Ok(())
        };
        if let Err(denied) = allowed {
            let reason = match denied {
                RetryDenied::Rate => "budget_rate",
                RetryDenied::Ratio => "budget_ratio",
            };
            metrics.retries_denied.with_label_values(&[reason]).inc();
            return Err(failure.into_api_error());
        }
        retries_spent += 1;
        let jitter: f64 = rand::rng().random_range(0.0..1.0);
        tokio::time::sleep(budget.config().backoff(retries_spent, jitter)).await;
        last_failure = Some(failure);
    }
}
