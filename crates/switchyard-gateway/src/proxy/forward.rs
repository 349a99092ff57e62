use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_admission::AdmissionPermit;
use switchyard_workers::{CallOutcome, InFlightGuard, WorkerHandle};

use super::finish::FinishHook;
use super::metered_body::{GatewayInFlight, MeteredBody, ResponseMeter};
use super::{REQUEST_ID_HEADER, WORKER_HEADER};
use crate::error::ApiError;
use crate::openai::Route;
use crate::state::AppState;

/// What every attempt of one client request shares.
pub struct RequestContext<'a> {
    pub state: &'a AppState,
    pub route: Route,
    pub client_headers: &'a HeaderMap,
    pub request_id: &'a str,
    pub started: Instant,
}

/// A worker's answer whose headers have arrived and whose status is not a 5xx.
pub struct UpstreamResponse {
    parts: http::response::Parts,
    body: Incoming,
    worker: Arc<WorkerHandle>,
    in_flight: InFlightGuard,
    sent_at: Instant,
}

/// Why one attempt failed before any byte reached the client; all of these may be retried
/// on another worker.
#[derive(Debug)]
pub enum AttemptFailure {
    Timeout {
        worker: String,
        after: Duration,
    },
    Transport {
        worker: String,
        connect: bool,
        detail: String,
    },
    ServerError {
        worker: String,
        status: StatusCode,
        detail: String,
    },
}

impl AttemptFailure {
    /// Metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            AttemptFailure::Timeout { .. } => "timeout",
            AttemptFailure::Transport { connect: true, .. } => "connect",
            AttemptFailure::Transport { .. } => "transport",
            AttemptFailure::ServerError { .. } => "status_5xx",
        }
    }

    pub fn into_api_error(self) -> ApiError {
        match self {
            AttemptFailure::Timeout { worker, after } => ApiError::gateway_timeout(format!(
                "worker `{worker}` did not answer within {} ms",
                after.as_millis()
            )),
            AttemptFailure::Transport { worker, detail, .. } => ApiError::bad_gateway(
                "upstream_unreachable",
                format!("worker `{worker}` failed: {detail}"),
            ),
            AttemptFailure::ServerError {
                worker,
                status,
                detail,
            } => ApiError::bad_gateway(
                "upstream_error",
                format!("worker `{worker}` answered {}: {detail}", status.as_u16()),
            ),
        }
    }
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

/// Sends the request to `worker` and waits for its response headers. Extra headers (the
/// request's tags) are added to the upstream request.
pub async fn attempt(
    ctx: &RequestContext<'_>,
    worker: &Arc<WorkerHandle>,
    body: Bytes,
    extra_headers: &[(&'static str, HeaderValue)],
) -> Result<UpstreamResponse, AttemptFailure> {
    let state = ctx.state;
    let name = worker.name().to_string();
    let uri = worker
        .uri_for(ctx.route.path())
        .map_err(|e| AttemptFailure::Transport {
            worker: name.clone(),
            connect: false,
            detail: format!("cannot build upstream URI: {e}"),
        })?;
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
    for (name, value) in extra_headers {
        builder = builder.header(*name, value);
    }
    let request = builder
        .body(Full::new(body))
        .map_err(|e| AttemptFailure::Transport {
            worker: name.clone(),
            connect: false,
            detail: format!("cannot build upstream request: {e}"),
        })?;

    let in_flight = worker.start_request();
    let sent_at = Instant::now();
    let timeout = state.config().upstream.request_timeout();
    let response = match tokio::time::timeout(timeout, state.client.request(request)).await {
        Err(_) => {
            return Err(AttemptFailure::Timeout {
                worker: name,
                after: timeout,
            });
        }
        Ok(Err(error)) => {
            return Err(AttemptFailure::Transport {
                worker: name,
                connect: error.is_connect(),
                detail: error_chain(&error),
            });
        }
        Ok(Ok(response)) => response,
    };
    let (parts, body) = response.into_parts();
    if parts.status.is_server_error() {
        let detail = read_error_body(body).await;
        return Err(AttemptFailure::ServerError {
            worker: name,
            status: parts.status,
            detail,
        });
    }
    Ok(UpstreamResponse {
        parts,
        body,
        worker: Arc::clone(worker),
        in_flight,
        sent_at,
    })
}

/// Turns the worker's answer into the client's response, streamed through a metered body.
pub fn respond(
    ctx: &RequestContext<'_>,
    upstream: UpstreamResponse,
    gateway_in_flight: GatewayInFlight,
    permit: AdmissionPermit,
    on_finish: Option<FinishHook>,
) -> Response {
    let UpstreamResponse {
        parts,
        body,
        worker,
        in_flight,
        sent_at,
    } = upstream;
    let metrics = &ctx.state.metrics;
    metrics
        .requests
        .with_label_values(&[ctx.route.label(), parts.status.as_str(), worker.name()])
        .inc();
    let is_sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        // A non-streaming worker sends its headers only when generation ends, so this
        // duration says nothing about slowness to first token; the latency collector judges
        // that. For the breaker it is a success.
        worker.record_outcome(CallOutcome::Success {
            ttfb: Duration::ZERO,
        });
    }
    let meter = ResponseMeter {
        metrics: Arc::clone(metrics),
        route: ctx.route,
        started: ctx.started,
        _worker_in_flight: in_flight,
        _gateway_in_flight: gateway_in_flight,
        permit: Some(permit),
        sent_at,
        status: parts.status,
        on_finish,
    };
    let mut response = Response::new(Body::new(MeteredBody::new(body, meter, is_sse)));
    *response.status_mut() = parts.status;
    let headers = response.headers_mut();
    for (name, value) in &parts.headers {
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
async fn read_error_body(body: Incoming) -> String {
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
