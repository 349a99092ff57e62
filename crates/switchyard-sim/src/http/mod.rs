//! The worker's HTTP surface as an axum router.

mod control;
mod embeddings;
mod error;
mod inference;
mod openai;
mod state;

use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};

use crate::engine::Engine;
use state::AppState;

/// All routes. Faults (`error`, `hang`) gate everything except `/metrics` and
/// `/admin/*`; `reset` is applied by the connection layer in `server`.
pub(crate) fn router(engine: Arc<Engine>) -> Router {
    let state = AppState::new(engine);
    let faultable = Router::new()
        .route("/v1/chat/completions", post(inference::chat_completions))
        .route("/v1/completions", post(inference::completions))
        .route("/v1/embeddings", post(embeddings::embeddings))
        .route("/v1/models", get(control::models))
        .route("/health", get(control::health))
        .route("/get_model_info", get(control::model_info))
        .route("/get_server_info", get(control::server_info))
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            control::fault_gate,
        ));
    Router::new()
        .route("/metrics", get(control::metrics))
        .route(
            "/admin/fault",
            get(control::get_fault).post(control::set_fault),
        )
        .merge(faultable)
        .with_state(state)
}
