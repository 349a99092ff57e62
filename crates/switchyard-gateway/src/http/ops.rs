use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::json;
use std::collections::BTreeMap;

use crate::state::SharedState;

/// Liveness: the process answers.
pub async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: at least one worker can be routed to.
pub async fn ready(State(state): State<SharedState>) -> Response {
    let routable = state
        .stack
        .registry
        .directory()
        .snapshot()
        .iter()
        .filter(|w| w.routability().is_routable())
        .count();
    if routable > 0 {
        Json(json!({"status": "ready", "routable_workers": routable})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "not_ready", "routable_workers": 0})),
        )
            .into_response()
    }
}

/// The models the registered workers serve, each with the longest context any of its workers
/// states (`max_model_len`, as vLLM reports it), by id.
fn model_objects(state: &SharedState) -> BTreeMap<String, serde_json::Value> {
    let workers = state.stack.registry.directory().snapshot();
    let mut longest: BTreeMap<String, Option<u64>> = BTreeMap::new();
    for worker in workers.iter() {
        for model in worker.models().iter().flat_map(|m| m.iter()) {
            let entry = longest.entry(model.clone()).or_default();
            *entry = (*entry).max(worker.max_model_len());
        }
    }
    longest
        .into_iter()
        .map(|(id, context)| {
            let mut object =
                json!({"id": id, "object": "model", "created": 0, "owned_by": "switchyard"});
            if let Some(context) = context {
                object["max_model_len"] = context.into();
            }
            (id, object)
        })
        .collect()
}

/// The union of the models the registered workers serve.
pub async fn models(State(state): State<SharedState>) -> Json<serde_json::Value> {
    let data: Vec<_> = model_objects(&state).into_values().collect();
    Json(json!({"object": "list", "data": data}))
}

/// One model (`GET /v1/models/{id}`; ids may hold slashes), or 404 `model_not_found`.
pub async fn model(
    State(state): State<SharedState>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, crate::error::ApiError> {
    model_objects(&state)
        .remove(&id)
        .map(Json)
        .ok_or_else(|| crate::error::ApiError::model_not_found(&id))
}

/// The Prometheus text. It names tenants, so `listener.metrics_token`, when set, must come as
/// `Authorization: Bearer <token>`.
pub async fn metrics(State(state): State<SharedState>, headers: http::HeaderMap) -> Response {
    let token = state.config().listener.metrics_token.clone();
    if !token.is_empty() {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        if !super::admin::constant_time_eq(presented.as_bytes(), token.expose().as_bytes()) {
            return crate::error::ApiError::unauthorized(
                "/metrics needs `Authorization: Bearer <listener.metrics_token>`",
            )
            .into_response();
        }
    }
    let text = state.stack.metrics.render(
        state.stack.registry.directory(),
        &state.stack.policy.stats(),
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}
