//! One chat-completion exchange: send, then read the SSE stream (or JSON body) into an outcome.

use std::time::Duration;
use switchyard_core::header_names;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde::Serialize;
use tokio::time::Instant;

use crate::chunk::{ChunkSummary, summarize_chunk};
use crate::client_retry::{parse_retry_after, parse_retry_after_ms};
use crate::priority::PriorityClass;
use crate::sse::SseParser;
use crate::transport::{Endpoint, HttpClient};
use crate::workload::{ChatMessage, PlannedRequest};

/// After `[DONE]`, frames already buffered are drained so the connection returns to the pool.
const MAX_TRAILING_FRAMES: usize = 8;

/// Worker name used when a successful response carried no `x-switchyard-worker` header.
pub const UNKNOWN_WORKER: &str = "unknown";

/// A request that produced a complete answer.
#[derive(Clone, Debug, Default)]
pub struct Completion {
    /// Time to the first event carrying content; `None` if no content arrived at all.
    pub ttft: Option<Duration>,
    pub e2e: Duration,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    pub worker: Option<String>,
    pub answer: String,
}

/// A failed request, keyed as in the report: an HTTP status ("503") or a kind ("connect", …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: String,
    /// The answer's status when the target answered at all.
    pub status: Option<StatusCode>,
    /// The answer's `Retry-After`, in delta-seconds form.
    pub retry_after: Option<Duration>,
}

impl Failure {
    pub fn new(kind: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            status: None,
            retry_after: None,
        }
    }

    pub fn status(status: StatusCode, retry_after: Option<Duration>) -> Self {
        Self {
            kind: status.as_u16().to_string(),
            status: Some(status),
            retry_after,
        }
    }
}

pub type Outcome = Result<Completion, Failure>;

/// What stays the same for every request of a run.
#[derive(Clone, Debug)]
pub struct ExchangeSettings {
    /// One per `--target`; an attempt names its own by index.
    pub endpoints: Vec<Endpoint>,
    pub model: String,
    pub max_tokens: u32,
    pub stream: bool,
}

/// What varies between attempts of the same planned request.
#[derive(Clone, Debug, Default)]
pub struct AttemptHeaders {
    /// Index into [`ExchangeSettings::endpoints`].
    pub target: usize,
    pub priority: Option<PriorityClass>,
    /// `x-switchyard-retry-count`, sent only when present.
    pub retry_count: Option<u32>,
    /// `x-request-id`, identical across a request's retries.
    pub request_id: Option<String>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct ChatRequestBody<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    max_tokens: u32,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
}

pub async fn send_chat(
    client: &HttpClient,
    settings: &ExchangeSettings,
    planned: &PlannedRequest,
    attempt: &AttemptHeaders,
) -> Outcome {
    let request = build_request(settings, planned, attempt)?;
    let started = Instant::now();
    let response = client.request(request).await.map_err(|error| {
        tracing::debug!(%error, "chat completion request failed");
        Failure::new(if error.is_connect() {
            "connect"
        } else {
            "transport"
        })
    })?;
    let status = response.status();
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let worker = header(header_names::WORKER);
    // Like the OpenAI SDKs: `retry-after-ms` first, then `Retry-After`.
    let retry_after = header(header_names::RETRY_AFTER_MS)
        .and_then(|v| parse_retry_after_ms(&v))
        .or_else(|| header(http::header::RETRY_AFTER.as_str()).and_then(|v| parse_retry_after(&v)));
    let body = response.into_body();
    if status != StatusCode::OK {
        // Error bodies are small JSON; reading them keeps the connection reusable.
        if let Ok(collected) = body.collect().await {
            let text = collected.to_bytes();
            tracing::debug!(%status, body = %String::from_utf8_lossy(&text), "non-200 answer");
        }
        return Err(Failure::status(status, retry_after));
    }
    let mut completion = if settings.stream {
        read_stream(body, started).await?
    } else {
        read_json(body, started).await?
    };
    completion.worker = worker;
    Ok(completion)
}

fn build_request(
    settings: &ExchangeSettings,
    planned: &PlannedRequest,
    attempt: &AttemptHeaders,
) -> Result<Request<Full<Bytes>>, Failure> {
    let endpoint = settings
        .endpoints
        .get(attempt.target)
        .ok_or_else(|| Failure::new("encode"))?;
    let body = ChatRequestBody {
        model: &settings.model,
        messages: &planned.messages,
        max_tokens: settings.max_tokens,
        stream: settings.stream,
        stream_options: settings.stream.then_some(StreamOptions {
            include_usage: true,
        }),
        user: planned.user.as_deref(),
    };
    let encode_failed = |_| Failure::new("encode");
    let json = serde_json::to_vec(&body).map_err(encode_failed)?;
    let header_value = |text: &str| HeaderValue::from_str(text).map_err(|_| Failure::new("encode"));
    let mut request = Request::post(endpoint.chat_completions.clone())
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(json)))
        .map_err(|_| Failure::new("encode"))?;
    let headers = request.headers_mut();
    if let Some(session) = &planned.session_id {
        headers.insert(header_names::SESSION_ID, header_value(session)?);
    }
    headers.extend(endpoint.extra_headers.clone());
    if let Some(priority) = attempt.priority {
        headers.insert(
            header_names::PRIORITY,
            HeaderValue::from_static(priority.as_str()),
        );
    }
    if let Some(count) = attempt.retry_count {
        headers.insert(header_names::RETRY_COUNT, HeaderValue::from(count));
    }
    if let Some(id) = &attempt.request_id {
        headers.insert(header_names::REQUEST_ID, header_value(id)?);
    }
    Ok(request)
}

async fn read_stream(mut body: Incoming, started: Instant) -> Result<Completion, Failure> {
    let mut parser = SseParser::new();
    let mut completion = Completion::default();
    let mut finished = false;
    while !finished {
        let Some(frame) = body.frame().await else {
            break;
        };
        let frame = frame.map_err(|_| Failure::new("stream_error"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        for event in parser.feed(&data) {
            finished |= apply_event(&event.data, started, &mut completion)?;
        }
    }
    if finished {
        drain_ready_frames(&mut body).await;
    } else if let Some(event) = parser.finish() {
        finished = apply_event(&event.data, started, &mut completion)?;
    }
    // A stream that ended without `[DONE]` never gave its client a whole answer.
    if !finished {
        return Err(Failure::new("stream_incomplete"));
    }
    completion.e2e = started.elapsed();
    Ok(completion)
}

/// Applies one SSE data payload; returns `true` on `[DONE]`.
fn apply_event(data: &str, started: Instant, completion: &mut Completion) -> Result<bool, Failure> {
    if data.trim() == "[DONE]" {
        return Ok(true);
    }
    let summary = summarize_chunk(data).ok_or_else(|| Failure::new("stream_error"))?;
    record_summary(summary, started, completion);
    Ok(false)
}

fn record_summary(summary: ChunkSummary, started: Instant, completion: &mut Completion) {
    if summary.has_content && completion.ttft.is_none() {
        completion.ttft = Some(started.elapsed());
    }
    completion.answer.push_str(&summary.content);
    if let Some(usage) = summary.usage {
        completion.prompt_tokens = usage.prompt_tokens;
        completion.cached_tokens = usage.cached_tokens;
        completion.completion_tokens = usage.completion_tokens;
    }
}

async fn drain_ready_frames(body: &mut Incoming) {
    for _ in 0..MAX_TRAILING_FRAMES {
        tokio::select! {
            biased;
            frame = body.frame() => match frame {
                Some(Ok(_)) => continue,
                Some(Err(_)) | None => return,
            },
            // Never wait: a server that keeps the stream open after [DONE] just loses keep-alive.
            () = std::future::ready(()) => return,
        }
    }
}

async fn read_json(body: Incoming, started: Instant) -> Result<Completion, Failure> {
    let bytes = body
        .collect()
        .await
        .map_err(|_| Failure::new("stream_error"))?
        .to_bytes();
    let text = std::str::from_utf8(&bytes).map_err(|_| Failure::new("bad_response"))?;
    let summary = summarize_chunk(text).ok_or_else(|| Failure::new("bad_response"))?;
    let mut completion = Completion::default();
    record_summary(summary, started, &mut completion);
    // Without streaming the whole answer arrives at once, so TTFT is the end-to-end latency.
    completion.e2e = started.elapsed();
    completion.ttft = Some(completion.e2e);
    Ok(completion)
}
