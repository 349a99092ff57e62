//! One attempt on one worker: the request sent with the client's forwardable headers, the
//! request's tags and a `traceparent`, then a wait for its first byte — the headers, and a
//! stream's first chunk — bounded by the attempt's deadline and by the worker being taken
//! out of routing meanwhile. A failure here has sent nothing to the client, so it may be
//! retried elsewhere.

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_workers::{InFlightGuard, WorkerHandle};
use tokio::sync::watch;

use super::context::RequestContext;
use crate::error::ApiError;
use crate::headers;
use crate::headers::TRACEPARENT;

/// A worker's answer whose headers have arrived and whose status is not a 5xx; for a
/// stream, its first chunk too (read before anything is sent to the client).
pub struct UpstreamResponse {
    pub(super) parts: http::response::Parts,
    pub(super) body: Incoming,
    pub(super) first_chunk: Option<Bytes>,
    pub(super) worker: Arc<WorkerHandle>,
    pub(super) in_flight: InFlightGuard,
    pub(super) sent_at: Instant,
    /// Prompt tokens (estimated), for settling a stream that breaks before its usage.
    pub(crate) prompt_tokens: u64,
}

/// Why one attempt failed before any byte reached the client; all of these may be retried
/// on another worker.
#[derive(Debug)]
pub enum AttemptFailure {
    Timeout {
        worker: String,
        after: Duration,
    },
    /// No byte of the answer within the attempt's first-byte deadline.
    FirstByteDeadline {
        worker: String,
        after: Duration,
    },
    /// The worker was taken out of routing while the attempt waited for its first byte.
    Rescued {
        worker: String,
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
            AttemptFailure::FirstByteDeadline { .. } => "first_byte_deadline",
            AttemptFailure::Rescued { .. } => "rescued",
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
            AttemptFailure::FirstByteDeadline { worker, after } => {
                ApiError::gateway_timeout(format!(
                    "worker `{worker}` sent no byte within its first-byte deadline of {} ms",
                    after.as_millis()
                ))
            }
            AttemptFailure::Rescued { worker } => ApiError::bad_gateway(
                "upstream_filtered",
                format!("worker `{worker}` was taken out of routing before it answered"),
            ),
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

const ERROR_BODY_LIMIT: usize = 4096;
const ERROR_BODY_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends the request to `worker` and waits for its first byte: the response headers, and
/// for a stream its first chunk too, so a worker that answers headers and then hangs is
/// still left before the client has seen anything. Gives up at `first_byte` (or the request
/// timeout, if sooner), or at once when the worker is taken out of routing meanwhile.
/// `bytes_due` tells the worker's hung detection when this request should be producing.
/// Extra headers (the request's tags) are added to the upstream request; `span_id` (the
/// attempt's span) goes to the worker as its `traceparent` parent.
pub async fn attempt(
    ctx: &RequestContext<'_>,
    worker: &Arc<WorkerHandle>,
    body: Bytes,
    extra_headers: &[(HeaderName, HeaderValue)],
    (first_byte, bytes_due): (Duration, Option<Duration>),
    span_id: &str,
) -> Result<UpstreamResponse, AttemptFailure> {
    let stack = ctx.stack;
    // Only a failure names the worker: no copy of the name on the way that succeeds.
    let name = || worker.name().to_string();
    let uri = worker
        .target_for(ctx.upstream_path)
        .map_err(|e| AttemptFailure::Transport {
            worker: name(),
            connect: false,
            detail: format!("cannot build upstream URI: {e}"),
        })?;
    let request =
        upstream_request(ctx, worker, uri, body, extra_headers, span_id).map_err(|detail| {
            AttemptFailure::Transport {
                worker: name(),
                connect: false,
                detail,
            }
        })?;

    // Subscribed before sending: a worker filtered from here on releases this attempt.
    let mut filtered = worker.subscribe_filtered();
    let mut in_flight = worker.start_request();
    if let Some(due) = bytes_due {
        in_flight.expect_bytes_within(due);
    }
    let sent_at = Instant::now();
    let request_timeout = stack.config().upstream.request_timeout();
    let limit = first_byte.min(request_timeout);
    let expired = || {
        if first_byte < request_timeout {
            AttemptFailure::FirstByteDeadline {
                worker: name(),
                after: limit,
            }
        } else {
            AttemptFailure::Timeout {
                worker: name(),
                after: limit,
            }
        }
    };
    let rescued = || AttemptFailure::Rescued { worker: name() };
    let deadline = tokio::time::Instant::now() + limit;
    // On the worker's own keep-alive connections: no pool key hashed to find or return one.
    // Boxed: the exchange's state (the request, the connection's send) is several hundred
    // bytes, and inline it would grow this future and every one holding it, each copied
    // whole whenever it moves.
    let send = Box::pin(worker.send(request));
    let response = match within(send, deadline, &mut filtered).await {
        Wait::Expired => return Err(expired()),
        Wait::Filtered => return Err(rescued()),
        Wait::Done(Err(error)) => {
            return Err(AttemptFailure::Transport {
                worker: name(),
                connect: error.is_connect(),
                detail: error_chain(&error),
            });
        }
        Wait::Done(Ok(response)) => response,
    };
    worker.note_progress();
    let (mut parts, mut body) = response.into_parts();
    if parts.status.is_server_error() {
        let detail = read_error_body(body).await;
        return Err(AttemptFailure::ServerError {
            worker: name(),
            status: parts.status,
            detail,
        });
    }
    let mut first_chunk = None;
    if parts.status.is_client_error() {
        first_chunk = Some(super::engine_error::normalise(&mut parts, &mut body).await);
    } else if is_event_stream(&parts.headers) {
        loop {
            match within(body.frame(), deadline, &mut filtered).await {
                Wait::Expired => return Err(expired()),
                Wait::Filtered => return Err(rescued()),
                Wait::Done(Some(Ok(frame))) => {
                    worker.note_progress();
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        first_chunk = Some(data);
                        break;
                    }
                }
                Wait::Done(Some(Err(error))) => {
                    return Err(AttemptFailure::Transport {
                        worker: name(),
                        connect: false,
                        detail: error_chain(&error),
                    });
                }
                // An empty stream: nothing to wait for.
                Wait::Done(None) => break,
            }
        }
    }
    Ok(UpstreamResponse {
        parts,
        body,
        first_chunk,
        worker: Arc::clone(worker),
        in_flight,
        sent_at,
        prompt_tokens: 0,
    })
}

/// The request to the worker: the client's method and body, the request id, the attempt's
/// `traceparent`, the forwardable client headers and `extra_headers`. Assembled on the
/// request's own header map (one allocation, no per-header builder step), with the `Host`
/// header the worker's handle keeps ready, so the HTTP client does not format one.
fn upstream_request(
    ctx: &RequestContext<'_>,
    worker: &WorkerHandle,
    uri: http::Uri,
    body: Bytes,
    extra_headers: &[(HeaderName, HeaderValue)],
    span_id: &str,
) -> Result<Request<Full<Bytes>>, String> {
    let request_id = HeaderValue::from_str(ctx.request_id)
        .map_err(|e| format!("cannot build upstream request: {e}"))?;
    // A bodiless pass-through (`GET`, `DELETE`) carries no JSON.
    let json = !body.is_empty() || ctx.method == Method::POST;
    let mut request = Request::new(Full::new(body));
    *request.method_mut() = ctx.method.clone();
    *request.uri_mut() = uri;
    let headers = request.headers_mut();
    headers.reserve(4 + FORWARDED_REQUEST_HEADERS.len() + extra_headers.len());
    if let Some(host) = worker.host_header() {
        headers.insert(header::HOST, host.clone());
    }
    headers.append(headers::REQUEST_ID, request_id);
    headers.append(TRACEPARENT, ctx.trace.header_for(span_id));
    if json {
        headers.append(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
    }
    for name in FORWARDED_REQUEST_HEADERS {
        if let Some(value) = ctx.client_headers.get(name) {
            headers.append(name, value.clone());
        }
    }
    for (name, value) in extra_headers {
        headers.append(name, value.clone());
    }
    Ok(request)
}

/// How a wait bounded by a deadline and the worker's filtered signal ended.
enum Wait<T> {
    Done(T),
    Expired,
    Filtered,
}

async fn within<F: std::future::Future>(
    future: F,
    deadline: tokio::time::Instant,
    filtered: &mut watch::Receiver<u64>,
) -> Wait<F::Output> {
    tokio::select! {
        biased;
        output = future => Wait::Done(output),
        () = tokio::time::sleep_until(deadline) => Wait::Expired,
        // A closed channel (cannot happen while the handle lives) just disables this arm.
        Ok(()) = filtered.changed() => Wait::Filtered,
    }
}

pub(super) fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
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
