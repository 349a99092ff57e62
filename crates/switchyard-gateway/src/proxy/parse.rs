//! Parse: only what routing and budgets need (model, stream, prompt text, user,
//! `max_tokens`). 400 past `limits.max_output_tokens`, or, for chat and completions, past the
//! longest context the model's workers stated; 400 (`context_length_exceeded`) for a prompt
//! plus output that no worker's context holds. A non-generation request that names no model
//! (a bodiless `GET`/`DELETE` names it in its `model` query parameter, if at all) is for the
//! one model the fleet serves.

use http::Method;

use crate::error::ApiError;
use crate::openai::{self, ChatKeyInputs, ParsedRequest};
use crate::state::Stack;

use super::context::RequestContext;
use super::context_fit;

/// The request's fields, and what the response-cache key reads of a chat body (so the key
/// needs no second pass over it).
pub(super) fn parse(
    ctx: &RequestContext<'_>,
    body: &[u8],
) -> Result<(ParsedRequest, Option<ChatKeyInputs>), ApiError> {
    let (mut parsed, key_inputs) = if ctx.method == Method::POST {
        openai::parse_keyed(ctx.route, body)?
    } else {
        (openai::parse_bodiless(ctx.upstream_path), None)
    };
    parsed.check_max_tokens(ctx.stack.config().limits.max_output_tokens)?;
    if ctx.route.is_generation() {
        if let Some(context) = model_context(ctx.stack, &parsed.model) {
            parsed.check_max_tokens(context)?;
        }
    } else if parsed.model.is_empty() {
        parsed.model = only_model(ctx.stack)?;
    }
    if context_fit::applies(ctx.route) {
        context_fit::refuse_if_none_fits(ctx.stack, &parsed)?;
    }
    Ok((parsed, key_inputs))
}

/// The longest context among the workers serving `model`, when every one of them stated it
/// (`max_model_len` from `/v1/models`): no worker could generate more than that.
fn model_context(stack: &Stack, model: &str) -> Option<u64> {
    let workers = stack.registry.directory().snapshot();
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

/// The model a request that names none is for: the one model the fleet serves. Undiscovered
/// workers (which may serve anything) leave it empty, so any worker is a candidate.
fn only_model(stack: &Stack) -> Result<String, ApiError> {
    let mut models: Vec<String> = Vec::new();
    for worker in stack.registry.directory().snapshot().iter() {
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
