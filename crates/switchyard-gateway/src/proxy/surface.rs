//! The request path of the non-generation surface (embeddings, tokenizer, rerank/score,
//! Responses, other `/v1/*`): identity, the degradation verdict, body, parse, then the same
//! admission, selection, retries and metering as chat. The downgrade chain and the response
//! cache are left out: they rewrite and answer chat and completions only.

use axum::body::Body;
use axum::response::Response;
use switchyard_core::RequestTags;
use switchyard_warmup::Verdict;
use switchyard_warmup::degradation::CallerSignals;

use super::finish::FinishHook;
use super::forward::RequestContext;
use super::{GatewayInFlight, body_limit, dispatch};
use crate::error::ApiError;
use crate::openai;
use crate::state::AppState;
use crate::warmup::front::{friendly, verdict_label};

pub(super) async fn serve(
    ctx: &RequestContext<'_>,
    body: Body,
    in_flight: GatewayInFlight,
) -> Result<Response, ApiError> {
    let state = ctx.state;
    let mut tags = state
        .admission
        .resolve(ctx.client_headers)
        .map_err(ApiError::refused)?;
    tracing::Span::current().record("caller", &*tags.caller);
    let (limit, deadline) = {
        let config = state.config();
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
        &state.pending_bodies,
        deadline,
    )
    .await?;
    let mut parsed = openai::parse(ctx.route, &bytes)?;
    parsed.check_max_tokens(state.config().limits.max_output_tokens)?;
    if parsed.model.is_empty() {
        parsed.model = only_model(state)?;
    }
    if let Some(answer) = degrade(ctx, &mut tags, &parsed.model) {
        return Ok(answer);
    }
    let manager = state.warmup.manager.clone();
    let purpose = tags.purpose;
    let on_finish = FinishHook::new(0, move |finished| {
        manager.note_spend(purpose, finished.tokens)
    });
    dispatch(ctx, &tags, &parsed, bytes, in_flight, Some(on_finish)).await
}

/// The degradation verdict for this caller: demoted priority, or the fallback answer when
/// only cached or warmed answers are served (nothing is cached for these endpoints).
fn degrade(ctx: &RequestContext<'_>, tags: &mut RequestTags, model: &str) -> Option<Response> {
    let state = ctx.state;
    let runtime = &state.warmup;
    let degradation = runtime.controller.config();
    let caller = CallerSignals {
        water_level: state.admission.caller_water_level(tags),
        lowest_served: state.admission.lowest_served_priority(),
    };
    let verdict = runtime
        .view
        .load_full()
        .allows_for(tags, &caller, &degradation)
        .verdict;
    runtime
        .metrics
        .verdicts
        .with_label_values(&[verdict_label(verdict)])
        .inc();
    match verdict {
        Verdict::Serve => None,
        Verdict::ServeAt(priority) => {
            tags.priority = priority;
            None
        }
        Verdict::CachedOrWarmedOnly | Verdict::Fallback => {
            Some(friendly(ctx, &degradation, model, tags))
        }
    }
}

/// The model a request that names none is for: the one model the fleet serves. Undiscovered
/// workers (which may serve anything) leave it empty, so any worker is a candidate.
fn only_model(state: &AppState) -> Result<String, ApiError> {
    let mut models: Vec<String> = Vec::new();
    for worker in state.registry.directory().snapshot().iter() {
        for model in worker.models().iter().flat_map(|m| m.iter()) {
            if !models.contains(model) {
                models.push(model.clone());
            }
        }
    }
    match models.len() {
        0 | 1 => Ok(models.pop().unwrap_or_default()),
        _ => Err(ApiError::bad_request(
            "invalid_request",
            format!(
                "`model` is required: this gateway serves several models ({})",
                models.join(", ")
            ),
        )),
    }
}
