//! HTTP surface: the OpenAI endpoints, operational endpoints and the admin API.

mod admin;
pub mod app;
mod chaos;
mod cluster;
mod inference;
mod ops;
mod surface;
mod warmup;

use axum::Router;
use axum::routing::{delete, get, post, put};

use crate::error::ApiError;
use crate::state::SharedState;

/// The client-facing routes. `/metrics` is among them unless `listener.metrics_addr` moves
/// it to its own listener ([`metrics_router`]).
pub fn router(state: SharedState) -> Router {
    let own_metrics_listener = !state.config().listener.metrics_addr.is_empty();
    let router = Router::new()
        .route("/v1/chat/completions", post(inference::chat_completions))
        .route("/v1/completions", post(inference::completions))
        .route("/v1/models", get(ops::models))
        .route("/v1/models/{*id}", get(ops::model))
        .route("/v1/embeddings", post(surface::embeddings))
        .route("/tokenize", post(surface::tokenize))
        .route("/detokenize", post(surface::detokenize))
        .route("/v1/rerank", post(surface::rerank))
        .route("/rerank", post(surface::rerank))
        .route("/v2/rerank", post(surface::rerank))
        .route("/v1/score", post(surface::score))
        .route("/score", post(surface::score))
        .route("/v1/responses", post(surface::responses))
        .route(
            "/v1/{*rest}",
            post(surface::passthrough).fallback(surface::passthrough_bodiless),
        )
        .route("/health", get(ops::health))
        .route("/ready", get(ops::ready))
        .route(
            "/admin/workers",
            get(admin::list_workers).post(admin::add_worker),
        )
        .route("/admin/workers/{name}", delete(admin::remove_worker))
        .route(
            "/admin/config",
            get(admin::get_config).put(admin::put_config),
        )
        .route("/admin/config/audit", get(admin::config_audit))
        .route("/admin/admission", get(admin::admission))
        .route("/admin/warmup", get(warmup::warmup))
        .route(
            "/admin/degradation",
            get(warmup::degradation).put(warmup::force_degradation),
        )
        .route("/admin/degradation/drill", post(warmup::drill))
        .route("/admin/cluster", get(cluster::cluster_status))
        .route("/admin/cluster/members", post(cluster::add_member))
        .route(
            "/admin/cluster/members/{id}",
            delete(cluster::remove_member),
        )
        .route(
            "/admin/cluster/members/{id}/promote",
            post(cluster::promote_member),
        )
        .route("/admin/quota", get(cluster::quota).put(cluster::set_quota))
        .route("/admin/quota/audit", get(cluster::audit))
        .route(
            "/admin/overrides",
            get(cluster::list_overrides).post(cluster::propose_override),
        )
        .route(
            "/admin/overrides/{id}/approve",
            post(cluster::approve_override),
        )
        .route("/admin/overrides/{id}", delete(cluster::revoke_override))
        .route("/admin/ledger/local", get(chaos::local_state))
        .route("/admin/ledger/spend-report", post(chaos::spend_report))
        .route("/admin/ledger/affinity", post(chaos::record_affinity))
        .route("/admin/chaos/clock", put(chaos::skew_clock))
        .route("/admin/chaos/flush-stall", put(chaos::flush_stall));
    let router = if own_metrics_listener {
        router
    } else {
        router.route("/metrics", get(ops::metrics))
    };
    router.fallback(not_found).with_state(state)
}

/// The routes of the separate metrics listener: `/metrics` (behind `listener.metrics_token`
/// when set) and nothing else.
pub fn metrics_router(state: SharedState) -> Router {
    Router::new()
        .route("/metrics", get(ops::metrics))
        .fallback(not_found)
        .with_state(state)
}

async fn not_found(uri: http::Uri) -> ApiError {
    ApiError::not_found("unknown_route", format!("no route for {}", uri.path()))
}
