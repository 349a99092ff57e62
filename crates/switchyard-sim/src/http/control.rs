//! Discovery, health, metrics and fault-control endpoints, plus the fault gate.

use axum::Json;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header;
use serde_json::json;

use super::error::ApiError;
use super::state::AppState;
use crate::config::BLOCK_TOKENS;
use crate::fault::{Fault, path_is_inference};

/// Applies the `error`, `unavailable`, `hang` and `engine_hang` faults before any faultable handler runs.
pub(crate) async fn fault_gate(
    State(app): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    match app.engine.faults.get() {
        Fault::Error => ApiError::injected_failure().into_response(),
        Fault::Unavailable { .. } => ApiError::injected_unavailable().into_response(),
        // Pending forever: hyper drops this future when the client goes away.
        Fault::Hang => std::future::pending().await,
        // Not even response headers until the engine is back; health stays 200.
        Fault::EngineHang if path_is_inference(request.uri().path()) => {
            app.engine.faults.wait_while_stalled(0).await;
            next.run(request).await
        }
        Fault::Ok
        | Fault::Slow { .. }
        | Fault::Reset
        | Fault::EngineHang
        | Fault::Stall { .. }
        | Fault::Trickle { .. } => next.run(request).await,
    }
}

pub(crate) async fn models(State(app): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({
        "object": "list",
        "data": [{
            "id": app.engine.config.model,
            "object": "model",
            "owned_by": "switchyard-sim",
        }],
    }))
}

pub(crate) async fn health() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// SGLang's discovery endpoint, so SGLang-aware gateways can register the worker.
pub(crate) async fn model_info(State(app): State<AppState>) -> Json<serde_json::Value> {
    Json(json!({"model_path": app.engine.config.model, "is_generation": true}))
}

pub(crate) async fn server_info(State(app): State<AppState>) -> Json<serde_json::Value> {
    let config = &app.engine.config;
    Json(json!({
        "model_path": config.model,
        "served_model_name": config.model,
        "worker_name": config.name,
        "max_running_requests": config.max_running,
        "max_total_num_tokens": config.kv_blocks * BLOCK_TOKENS,
        "page_size": BLOCK_TOKENS,
        "version": concat!("switchyard-sim ", env!("CARGO_PKG_VERSION")),
    }))
}

pub(crate) async fn metrics(State(app): State<AppState>) -> Response {
    match app.engine.render_metrics() {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(err) => ApiError::internal(format!("metrics encoding failed: {err}")).into_response(),
    }
}

pub(crate) async fn get_fault(State(app): State<AppState>) -> Json<Fault> {
    Json(app.engine.faults.get())
}

pub(crate) async fn set_fault(State(app): State<AppState>, body: Bytes) -> Response {
    let fault: Fault = match serde_json::from_slice(&body) {
        Ok(fault) => fault,
        Err(err) => return ApiError::bad_request(format!("invalid fault: {err}")).into_response(),
    };
    if !fault.is_valid() {
        return ApiError::bad_request(
            "slow factor, trickle interval and unavailable for_ms must be positive numbers",
        )
        .into_response();
    }
    app.engine.faults.set(fault);
    tracing::info!(worker = %app.engine.config.name, ?fault, "fault set");
    Json(fault).into_response()
}
