use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_workers::WorkerHandle;

use super::metered_body::{GatewayInFlight, MeteredBody, ResponseMeter};
use super::{REQUEST_ID_HEADER, WORKER_HEADER};
use crate::error::ApiError;
use crate::openai::Route;
use crate::state::AppState;

pub struct ForwardContext<'a> {
    pub state: &'a AppState,
    pub route: Route,
    pub client_headers: &'a HeaderMap,
    pub request_id: &'a str,
    pub started: Instant,
    pub in_flight: GatewayInFlight,
}

/// Request headers from the client worth passing to a worker. Credentials meant for the
/// gateway are deliberately not forwarded.
const FORWARDED_REQUEST_HEADERS: &[HeaderName] = &[header::ACCEPT, header::USER_AGENT];

/// Upstream response headers that describe the connection, not the content.
const HOP_BY_HOP: &[HeaderName] = &[
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::CONTENT_LENGTH,
    header::UPGRADE,
    header::TE,
    header::TRAILER,
    header::PROXY_AUTHENTICATE,
];

const ERROR_BODY_LIMIT: usize = 4096;
const ERROR_BODY_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends the request to `worker` and streams its answer back as it arrives.
pub async fn forward(
    ctx: ForwardContext<'_>,
    worker: Arc<WorkerHandle>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let state = ctx.state;
    let uri = worker
        .uri_for(ctx.route.path())
        .map_err(|e| ApiError::internal(format!("cannot build upstream URI: {e}")))?;
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(REQUEST_ID_HEADER, ctx.request_id);
    for name in FORWARDED_REQUEST_HEADERS {
        if let Some(value) = ctx.client_headers.get(name) {
            builder = builder.header(name, value);
        }
    }
    let request = builder
        .body(Full::new(body))
        .map_err(|e| ApiError::internal(format!("cannot build upstream request: {e}")))?;

    let worker_guard = worker.start_request();
    let timeout = state.config.upstream.request_timeout();
    let response = match tokio::time::timeout(timeout, state.client.request(request)).await {
        Err(_) => {
            state
                .metrics
                .upstream_errors
                .with_label_values(&["timeout"])
                .inc();
            return Err(ApiError::gateway_timeout(format!(
                "worker `{}` did not answer within {} ms",
                worker.name(),
                timeout.as_millis()
            )));
        }
        Ok(Err(error)) => {
            let kind = if error.is_connect() {
                "connect"
            } else {
                "transport"
            };
            state
                .metrics
                .upstream_errors
                .with_label_values(&[kind])
                .inc();
            return Err(ApiError::bad_gateway(
                "upstream_unreachable",
                format!("worker `{}` failed: {}", worker.name(), error_chain(&error)),
            ));
        }
        Ok(Ok(response)) => response,
    };

    let (parts, upstream_body) = response.into_parts();
    if parts.status.is_server_error() {
        state
            .metrics
            .upstream_errors
            .with_label_values(&["status_5xx"])
            .inc();
        let detail = read_error_body(upstream_body).await;
        return Err(ApiError::bad_gateway(
            "upstream_error",
            format!(
                "worker `{}` answered {}: {}",
                worker.name(),
                parts.status.as_u16(),
                detail
            ),
        ));
    }

    let is_sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    state
        .metrics
        .requests
        .with_label_values(&[ctx.route.label(), parts.status.as_str(), worker.name()])
        .inc();
    let meter = ResponseMeter {
        metrics: Arc::clone(&state.metrics),
        route: ctx.route,
        started: ctx.started,
        _worker_in_flight: worker_guard,
        _gateway_in_flight: ctx.in_flight,
    };
    let body = MeteredBody::new(upstream_body, meter, is_sse);
    Ok(build_response(parts.status, &parts.headers, &worker, body))
}

fn build_response(
    status: StatusCode,
    upstream_headers: &HeaderMap,
    worker: &WorkerHandle,
    body: MeteredBody,
) -> Response {
    let mut response = Response::new(Body::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    for (name, value) in upstream_headers {
        if !HOP_BY_HOP.contains(name) {
            headers.append(name, value.clone());
        }
    }
    if let Ok(value) = HeaderValue::from_str(worker.name()) {
        headers.insert(WORKER_HEADER, value);
    }
    response
}

/// A short, bounded excerpt of a failing worker's body for the client's error message.
async fn read_error_body(body: hyper::body::Incoming) -> String {
    let read = tokio::time::timeout(
        ERROR_BODY_TIMEOUT,
        Limited::new(body, ERROR_BODY_LIMIT).collect(),
    );
    match read.await {
        Ok(Ok(collected)) => {
            let bytes = collected.to_bytes();
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim();
            if text.is_empty() {
                "(empty body)".into()
            } else {
                text.to_string()
            }
        }
        _ => "(body unavailable)".into(),
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
