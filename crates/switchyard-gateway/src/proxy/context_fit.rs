//! Context-length fit: a request goes only to workers whose stated context (`max_model_len`
//! from `/v1/models`) holds its prompt plus its requested output. One that fits none of its
//! model's workers is a 400 (`context_length_exceeded`) before it is admitted, rather than an
//! engine error after it has spent a slot and a budget reservation.
//!
//! Workers that have not stated a context are assumed to fit: the engine then judges.

use std::sync::Arc;
use switchyard_workers::WorkerHandle;

use crate::error::ApiError;
use crate::openai::{ParsedRequest, Route};
use crate::state::Stack;

/// Whether the route's prompt text is one sequence on the engine. Encoders (embeddings,
/// rerank, score) take each input on its own, so their joined text says nothing about fit.
pub(super) fn applies(route: Route) -> bool {
    matches!(
        route,
        Route::ChatCompletions | Route::Completions | Route::Responses
    )
}

/// Whether `worker` can hold `needed` tokens of context, as far as it has said.
pub(super) fn fits(worker: &WorkerHandle, needed: u64) -> bool {
    worker.max_model_len().is_none_or(|len| len >= needed)
}

/// The 400 when every worker serving the request's model stated a context and none of them
/// fits it. Nothing when a worker fits, when one has not stated its context, or when no worker
/// serves the model (selection answers that with its 404).
pub(super) fn refuse_if_none_fits(stack: &Stack, request: &ParsedRequest) -> Result<(), ApiError> {
    let workers = stack.registry.directory().snapshot();
    let serving: Vec<&Arc<WorkerHandle>> = workers
        .iter()
        .filter(|w| w.serves(&request.model))
        .collect();
    match longest_if_none_fits(&serving, request.context_needed()) {
        Some(longest) => {
            stack
                .metrics
                .routing_decisions
                .with_label_values(&["prefilter", "context_too_long"])
                .inc();
            Err(request.context_refusal(longest))
        }
        None => Ok(()),
    }
}

/// The longest stated context among `serving` when none of them fits `needed` (and every one
/// stated it); `None` otherwise.
pub(super) fn longest_if_none_fits(serving: &[&Arc<WorkerHandle>], needed: u64) -> Option<u64> {
    let mut longest = None;
    for worker in serving {
        let len = worker.max_model_len()?;
        if len >= needed {
            return None;
        }
        longest = Some(longest.map_or(len, |l: u64| l.max(len)));
    }
    longest
}
