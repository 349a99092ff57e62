//! `POST /v1/chat/completions` and `POST /v1/completions`, streaming or not.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::header;
use serde_json::Value;

use super::error::ApiError;
use super::openai::{Endpoint, InferenceRequest, ResponseMeta, parse_request};
use super::state::AppState;
use crate::generation::{GenEvent, Generation};
use crate::tokens::chat_answer_head;

pub(crate) async fn chat_completions(State(app): State<AppState>, body: Bytes) -> Response {
    answer(app, Endpoint::Chat, body).await
}

pub(crate) async fn completions(State(app): State<AppState>, body: Bytes) -> Response {
    answer(app, Endpoint::Completion, body).await
}

async fn answer(app: AppState, endpoint: Endpoint, body: Bytes) -> Response {
    let config = &app.engine.config;
    let request = match parse_request(endpoint, &body, config.default_max_tokens) {
        Ok(request) => request,
        Err(err) => return err.into_response(),
    };
    if request.model != config.model {
        return ApiError::model_not_found(&request.model).into_response();
    }
    let reply = Reply {
        meta: ResponseMeta {
            endpoint,
            id: app.next_response_id(endpoint),
            created: unix_seconds(),
            model: request.model.clone(),
        },
        finish_reason: finish_reason(&request),
        include_usage: request.include_usage,
        tokens_sent: 0,
    };
    let mut generation =
        Generation::new(Arc::clone(&app.engine), &request.prompt, request.max_tokens);
    if matches!(endpoint, Endpoint::Chat) {
        generation = generation.with_answer_head(chat_answer_head());
    }
    if request.stream {
        stream_response(generation, reply)
    } else {
        collect_response(generation, reply).await
    }
}

/// Producing exactly the requested length reads as truncation; the default
/// length reads as a natural stop.
fn finish_reason(request: &InferenceRequest) -> &'static str {
    if request.limit_given {
        "length"
    } else {
        "stop"
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

/// Per-request response shaping state.
struct Reply {
    meta: ResponseMeta,
    finish_reason: &'static str,
    include_usage: bool,
    tokens_sent: usize,
}

fn sse_frame(out: &mut String, payload: &Value) {
    out.push_str("data: ");
    out.push_str(&payload.to_string());
    out.push_str("\n\n");
}

/// SSE body driven by the generation itself: dropping the body (client gone)
/// drops the generation, which frees its slot and counts the cancellation.
fn stream_response(generation: Generation, reply: Reply) -> Response {
    let frames = futures_util::stream::unfold(
        (generation, reply),
        |(mut generation, mut reply)| async move {
            let mut frame = String::new();
            match generation.next_event().await? {
                GenEvent::Token(piece) => {
                    let first = reply.tokens_sent == 0;
                    sse_frame(&mut frame, &reply.meta.token_chunk(&piece, first));
                    reply.tokens_sent += 1;
                }
                GenEvent::Finished(usage) => {
                    sse_frame(&mut frame, &reply.meta.finish_chunk(reply.finish_reason));
                    if reply.include_usage {
                        sse_frame(&mut frame, &reply.meta.usage_chunk(&usage));
                    }
                    frame.push_str("data: [DONE]\n\n");
                }
            }
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (generation, reply)))
        },
    );
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(frames),
    )
        .into_response()
}

/// Runs the generation inside the handler; if the client disconnects first,
/// hyper drops this future and the generation with it.
async fn collect_response(mut generation: Generation, reply: Reply) -> Response {
    let mut text = String::new();
    while let Some(event) = generation.next_event().await {
        match event {
            GenEvent::Token(piece) => text.push_str(&piece),
            GenEvent::Finished(usage) => {
                let body = reply.meta.full_response(&text, reply.finish_reason, &usage);
                return Json(body).into_response();
            }
        }
    }
    ApiError::internal("generation ended without a result").into_response()
}
