use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::json;
use std::collections::BTreeSet;

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

/// The union of the models the registered workers serve.
pub async fn models(State(state): State<SharedState>) -> Json<serde_json::Value> {
    let workers = state.stack.registry.directory().snapshot();
    let names: BTreeSet<String> = workers
        .iter()
        .filter_map(|w| w.models())
        .flat_map(|models| models.as_ref().clone())
        .collect();
    let data: Vec<_> = names
        .into_iter()
        .map(|id| json!({"id": id, "object": "model", "created": 0, "owned_by": "switchyard"}))
        .collect();
    Json(json!({"object": "list", "data": data}))
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
