//! The inference request path, one stage per module, assembled here in order:
//! read body → parse → select worker → forward → meter the streamed response.
//! Later stages (admission, prefilters, retries) slot in between as their own modules.

mod body_limit;
mod forward;
mod metered_body;
mod select;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue};
use std::time::Instant;
use tracing::Instrument;

use crate::error::ApiError;
use crate::openai::{self, Route};
use crate::state::SharedState;

pub use metered_body::GatewayInFlight;

pub const REQUEST_ID_HEADER: &str = "x-request-id";
pub const WORKER_HEADER: &str = "x-switchyard-worker";

/// Serves one OpenAI inference request end to end. Never panics on input; every failure
/// becomes an OpenAI-shaped error response.
pub async fn handle(state: SharedState, route: Route, headers: HeaderMap, body: Body) -> Response {
    let request_id = request_id(&headers);
    let span = tracing::info_span!("request", request_id = %request_id, route = route.label());
    async move {
        let started = Instant::now();
        let in_flight = GatewayInFlight::enter(&state.metrics);
        let mut response = match serve(&state, route, &headers, body, &request_id, started, in_flight).await {
            Ok(response) => response,
            Err(error) => {
                tracing::debug!(status = error.status.as_u16(), code = error.code, message = %error.message, "request refused");
                state
                    .metrics
                    .requests
                    .with_label_values(&[route.label(), error.status.as_str(), "none"])
                    .inc();
                error.into_response()
            }
        };
        if let Ok(value) = HeaderValue::from_str(&request_id) {
            response.headers_mut().insert(REQUEST_ID_HEADER, value);
        }
        response
    }
    .instrument(span)
    .await
}

async fn serve(
    state: &SharedState,
    route: Route,
    headers: &HeaderMap,
    body: Body,
    request_id: &str,
    started: Instant,
    in_flight: GatewayInFlight,
) -> Result<Response, ApiError> {
    let bytes = body_limit::read(headers, body, state.config.server.max_body_bytes).await?;
    let parsed = openai::parse(route, &bytes)?;
    let (worker, decision) = select::select_worker(state, &parsed)?;
    tracing::debug!(worker = worker.name(), branch = decision.branch, "routed");
    let ctx = forward::ForwardContext {
        state,
        route,
        client_headers: headers,
        request_id,
        started,
        in_flight,
    };
    forward::forward(ctx, worker, bytes).await
}

/// The caller's request id when it sent a usable one, else a fresh UUID.
fn request_id(headers: &HeaderMap) -> String {
    headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 128)
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}
