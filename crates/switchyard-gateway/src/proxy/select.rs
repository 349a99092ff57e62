use std::sync::Arc;
use switchyard_core::WorkerId;
use switchyard_router::{Candidate, Decision, RouteRequest};
use switchyard_workers::WorkerHandle;

use crate::error::ApiError;
use crate::openai::ParsedRequest;
use crate::state::AppState;

/// Seconds a client should wait before retrying when nothing can serve it.
const NO_WORKER_RETRY_AFTER: u64 = 1;

/// Picks the worker for a request: the registry's workers that serve the model, minus the
/// ones already tried for this request, then the routing policy. Answers 404 for a model no
/// worker serves and 503 when none can take it.
pub fn select_worker(
    state: &AppState,
    request: &ParsedRequest,
    session_id: Option<&str>,
    exclude: &[WorkerId],
) -> Result<(Arc<WorkerHandle>, Decision), ApiError> {
    let workers = state.registry.directory().snapshot();
    if workers.is_empty() {
        return Err(ApiError::unavailable(
            "no_workers",
            "no inference workers are registered",
            NO_WORKER_RETRY_AFTER,
        ));
    }
    let serving: Vec<&Arc<WorkerHandle>> = workers
        .iter()
        .filter(|w| w.serves(&request.model))
        .collect();
    if serving.is_empty() {
        return Err(ApiError::model_not_found(&request.model));
    }
    let candidates: Vec<Candidate> = serving
        .iter()
        .filter(|w| !exclude.contains(&w.id()))
        .map(|w| Candidate {
            id: w.id(),
            in_flight: w.in_flight(),
        })
        .collect();
    let route_request = RouteRequest {
        prompt: &request.prompt,
        session_id,
        user: request.user.as_deref(),
    };
    if candidates.is_empty() {
        return Err(ApiError::unavailable(
            "no_routable_worker",
            "no worker can take this request now",
            NO_WORKER_RETRY_AFTER,
        ));
    }
    let decision = state
        .policy
        .select(&route_request, &candidates)
        .ok_or_else(|| {
            ApiError::unavailable(
                "no_routable_worker",
                "no worker can take this request now",
                NO_WORKER_RETRY_AFTER,
            )
        })?;
    state
        .metrics
        .routing_decisions
        .with_label_values(&[state.policy.name(), decision.branch])
        .inc();
    let worker = serving
        .into_iter()
        .find(|w| w.id() == decision.worker)
        .cloned()
        .ok_or_else(|| {
            ApiError::internal("routing policy chose a worker that is not a candidate")
        })?;
    Ok((worker, decision))
}
