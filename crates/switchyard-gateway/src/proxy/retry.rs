//! Attempts a request on workers until one answers: on a connect failure, a 5xx or a
//! timeout — all before any byte reached the client — retry on a *different* worker, within
//! `max_retries` and the retry budget, after an exponential backoff with jitter. A response
//! that has started streaming is never retried (it has already been handed to the client).
//! Retries of refused connects do not spend the budget: nothing reached a worker, so they
//! add no load beyond the request itself.

use bytes::Bytes;
use http::HeaderValue;
use rand::Rng;
use switchyard_core::{Purpose, RequestTags, WorkerId};

use super::forward::{self, AttemptFailure, RequestContext, UpstreamResponse};
use super::retry_budget::RetryDenied;
use super::select;
use crate::error::ApiError;
use crate::openai::ParsedRequest;
use switchyard_workers::CallOutcome;

pub const PURPOSE_HEADER: &str = "x-switchyard-purpose";
pub const CALLER_HEADER: &str = "x-switchyard-caller";
pub const PRIORITY_HEADER: &str = "x-switchyard-priority";

/// Runs the first attempt and any retries; returns the first usable upstream response.
pub async fn send_with_retries(
    ctx: &RequestContext<'_>,
    request: &ParsedRequest,
    body: Bytes,
    tags: &RequestTags,
) -> Result<UpstreamResponse, ApiError> {
    let state = ctx.state;
    let budget = &state.retry_budget;
    let metrics = &state.metrics;
    budget.record_first_attempt();
    let config = state.config();
    let session_id = ctx
        .client_headers
        .get(config.routing.routing_key.session_header.as_str())
        .and_then(|v| v.to_str().ok());
    let mut tried: Vec<WorkerId> = Vec::new();
    let mut last_failure: Option<AttemptFailure> = None;
    loop {
        let (worker, decision) = match select::select_worker(state, request, session_id, &tried) {
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
        metrics
            .upstream_attempts
            .with_label_values(&[if is_retry { "retry" } else { "first" }])
            .inc();
        tracing::debug!(
            worker = worker.name(),
            branch = decision.branch,
            retry = is_retry,
            "routed"
        );
        // The request's tags travel to the worker (and survive retries, purpose aside).
        let mut headers = vec![
            (
                PURPOSE_HEADER,
                HeaderValue::from_static(attempt_purpose.as_str()),
            ),
            (
                PRIORITY_HEADER,
                HeaderValue::from_static(tags.priority.as_str()),
            ),
        ];
        if let Ok(caller) = HeaderValue::from_str(&tags.caller) {
            headers.push((CALLER_HEADER, caller));
        }
        let failure = match forward::attempt(ctx, &worker, body.clone(), &headers).await {
            Ok(response) => return Ok(response),
            Err(failure) => failure,
        };
        worker.record_outcome(CallOutcome::Failure);
        metrics
            .upstream_errors
            .with_label_values(&[failure.kind()])
            .inc();
        tracing::warn!(
            worker = worker.name(),
            kind = failure.kind(),
            "attempt failed"
        );
        tried.push(worker.id());
        let retries_so_far = (tried.len() - 1) as u32;
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
        let jitter: f64 = rand::rng().random_range(0.0..1.0);
        tokio::time::sleep(budget.config().backoff(retries_so_far + 1, jitter)).await;
        last_failure = Some(failure);
    }
}
