//! The HTTP side of a drain: readiness, `Connection: close`, refusals, and the in-flight
//! count that the drain waits on (a streamed response counts until its last byte).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::json;
use std::future::Future;
use std::sync::Arc;

use super::Lifecycle;
use crate::error::ApiError;

/// Paths that answer throughout a drain and are not counted: probes and scrapes.
fn is_probe(path: &str) -> bool {
    matches!(path, "/ready" | "/health" | "/metrics")
}

pub async fn guard(
    State(lifecycle): State<Arc<Lifecycle>>,
    request: Request,
    next: Next,
) -> Response {
    guarded(&lifecycle, request, |request| next.run(request)).await
}

/// [`guard`] around `run` (the router's next step, or the direct inference route of
/// `http::App`), so both paths answer a drain alike.
pub async fn guarded<F, Fut>(lifecycle: &Arc<Lifecycle>, request: Request, run: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: Future<Output = Response>,
{
    let path = request.uri().path();
    if is_probe(path) {
        if path == "/ready" && lifecycle.is_draining() {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(json!({"status": "draining"})),
            )
                .into_response();
        }
        return run(request).await;
    }
    if lifecycle.is_refusing() {
        lifecycle.count_refusal();
        let mut response = ApiError::unavailable(
            "shutting_down",
            "this gateway replica is shutting down; retry on another replica",
            1,
        )
        .into_response();
        close_connection(&mut response);
        return response;
    }
    let in_flight = lifecycle.enter();
    let response = run(request).await;
    let (mut parts, body) = response.into_parts();
    if lifecycle.is_draining() {
        parts
            .headers
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    // The guard lives inside the body, so a stream counts until hyper drops it (finished,
    // or the client went away).
    let body = Body::new(body.map_frame(move |frame| {
        let _held = &in_flight;
        frame
    }));
    Response::from_parts(parts, body)
}

fn close_connection(response: &mut Response) {
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
}
