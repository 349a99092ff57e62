//! Billing of streams whose client did not ask for usage: the worker is asked for the final
//! usage chunk anyway (`stream_options.include_usage`), so the spend is what it generated
//! rather than the estimate, and that chunk is taken out of the stream before it reaches a
//! client that never asked for it.

use axum::body::Body;
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};
use serde_json::Value;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::openai::{ParsedRequest, Route};

/// A partial SSE event longer than this is passed on as it is: no usage chunk is this long.
const MAX_HELD_BYTES: usize = 64 * 1024;

/// For a chat or completions stream whose client did not ask for usage: the body asking for
/// it, and `true` — strip it on the way back. The rest of the surface is forwarded as it is
/// (Responses streams always end with their usage).
pub(crate) fn ask_unless_asked(
    route: Route,
    request: &ParsedRequest,
    body: Bytes,
) -> (Bytes, bool) {
    let hide_usage = route.is_generation() && request.stream && !request.include_usage;
    match hide_usage.then(|| ask_for_usage(&body)) {
        Some(Some(asked)) => (asked, true),
        _ => (body, hide_usage),
    }
}

/// The request body with `stream_options.include_usage = true`; `None` when the body is not
/// a JSON object (then it is forwarded unchanged and billed by the fallback).
pub(crate) fn ask_for_usage(body: &[u8]) -> Option<Bytes> {
    let mut value: Value = serde_json::from_slice(body).ok()?;
    let object = value.as_object_mut()?;
    let options = object
        .entry("stream_options")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !options.is_object() {
        *options = Value::Object(serde_json::Map::new());
    }
    options
        .as_object_mut()?
        .insert("include_usage".into(), Value::Bool(true));
    serde_json::to_vec(&value).ok().map(Bytes::from)
}

/// `response` with the usage-only SSE event removed from its body (a non-SSE response is
/// returned unchanged).
pub(crate) fn strip_usage_chunk(response: Response) -> Response {
    let is_sse = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !is_sse {
        return response;
    }
    response.map(|body| Body::new(StripUsageChunk::new(body)))
}

/// Passes SSE events through whole, except the one carrying only usage (empty `choices`).
pub(crate) struct StripUsageChunk<B> {
    inner: B,
    held: BytesMut,
    inner_done: bool,
}

impl<B> StripUsageChunk<B> {
    pub(crate) fn new(inner: B) -> Self {
        Self {
            inner,
            held: BytesMut::new(),
            inner_done: false,
        }
    }

    /// The complete events held so far, minus the usage-only one; keeps the partial tail.
    fn complete_events(&mut self) -> Bytes {
        let Some(end) = last_event_end(&self.held) else {
            if self.held.len() > MAX_HELD_BYTES {
                return self.held.split().freeze();
            }
            return Bytes::new();
        };
        let complete = self.held.split_to(end).freeze();
        let mut kept = BytesMut::with_capacity(complete.len());
        let mut start = 0;
        while start < complete.len() {
            let stop = next_event_end(&complete[start..]).map_or(complete.len(), |e| start + e);
            let event = &complete[start..stop];
            if !is_usage_only(event) {
                kept.extend_from_slice(event);
            }
            start = stop;
        }
        kept.freeze()
    }
}

impl<B> HttpBody for StripUsageChunk<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        loop {
            if this.inner_done {
                if this.held.is_empty() {
                    return Poll::Ready(None);
                }
                return Poll::Ready(Some(Ok(Frame::data(this.held.split().freeze()))));
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => this.inner_done = true,
                Poll::Ready(Some(Err(error))) => return Poll::Ready(Some(Err(error))),
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => {
                        this.held.extend_from_slice(&data);
                        let out = this.complete_events();
                        if !out.is_empty() {
                            return Poll::Ready(Some(Ok(Frame::data(out))));
                        }
                    }
                    Err(other) => return Poll::Ready(Some(Ok(other))),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner_done && self.held.is_empty()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// Index just past the first blank line (`\n\n` or `\n\r\n`) in `bytes`.
fn next_event_end(bytes: &[u8]) -> Option<usize> {
    (0..bytes.len()).find_map(|i| {
        if bytes[i] != b'\n' {
            return None;
        }
        match bytes.get(i + 1) {
            Some(b'\n') => Some(i + 2),
            Some(b'\r') if bytes.get(i + 2) == Some(&b'\n') => Some(i + 3),
            _ => None,
        }
    })
}

/// Index just past the last blank line in `bytes`.
fn last_event_end(bytes: &[u8]) -> Option<usize> {
    let mut end = None;
    let mut at = 0;
    while let Some(next) = next_event_end(&bytes[at..]) {
        at += next;
        end = Some(at);
    }
    end
}

/// An SSE event whose data is `{"choices": [], "usage": {...}, ...}`.
fn is_usage_only(event: &[u8]) -> bool {
    if !event.windows(7).any(|w| w == b"\"usage\"") {
        return false;
    }
    let Ok(text) = std::str::from_utf8(event) else {
        return false;
    };
    let data: String = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(|payload| payload.strip_prefix(' ').unwrap_or(payload))
        .collect::<Vec<_>>()
        .join("\n");
    let Ok(value) = serde_json::from_str::<Value>(&data) else {
        return false;
    };
    value["usage"].is_object()
        && value["choices"]
            .as_array()
            .is_some_and(|choices| choices.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    const USAGE: &str = "data: {\"id\":\"c\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":9}}\n\n";

    async fn filtered(frames: Vec<&'static str>) -> String {
        let stream = futures_util::stream::iter(
            frames
                .into_iter()
                .map(|f| Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(f)))),
        );
        let body = StripUsageChunk::new(StreamBody::new(stream));
        let bytes = body.collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn the_usage_event_is_removed_wherever_the_frames_split() {
        let whole = format!(
            "data: {{\"choices\":[{{\"delta\":{{\"content\":\"a\"}}}}]}}\n\n{USAGE}data: [DONE]\n\n"
        );
        let expected = "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n";
        let leaked: &'static str = Box::leak(whole.into_boxed_str());
        for cut in 1..leaked.len() {
            let out = filtered(vec![&leaked[..cut], &leaked[cut..]]).await;
            assert_eq!(out, expected, "split at {cut}");
        }
    }

    #[tokio::test]
    async fn events_with_choices_and_crlf_streams_pass_unchanged() {
        let text = "data: {\"choices\":[{\"delta\":{}}],\"usage\":{\"completion_tokens\":1}}\r\n\r\ndata: [DONE]\r\n\r\n";
        assert_eq!(filtered(vec![text]).await, text);
        let crlf_usage = "data: {\"choices\":[],\"usage\":{\"completion_tokens\":1}}\r\n\r\n";
        assert_eq!(filtered(vec![crlf_usage]).await, "");
    }

    #[test]
    fn include_usage_is_added_and_other_fields_kept() {
        let body = br#"{"model":"m","stream":true,"stream_options":{"foo":1},"messages":[]}"#;
        let asked: Value = serde_json::from_slice(&ask_for_usage(body).unwrap()).unwrap();
        assert_eq!(asked["stream_options"]["include_usage"], true);
        assert_eq!(asked["stream_options"]["foo"], 1);
        assert_eq!(asked["model"], "m");
        let plain = ask_for_usage(br#"{"stream_options":null}"#).unwrap();
        assert_eq!(
            serde_json::from_slice::<Value>(&plain).unwrap()["stream_options"]["include_usage"],
            true
        );
        assert!(ask_for_usage(b"[1]").is_none());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

            #[test]
            fn a_stream_without_a_usage_event_passes_byte_for_byte(
                contents in proptest::collection::vec("[a-z \"\\\\]{0,12}", 0..20),
                cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..4),
            ) {
                let mut text = String::new();
                for content in &contents {
                    let chunk = serde_json::json!({"choices": [{"delta": {"content": content}}]});
                    text.push_str(&format!("data: {chunk}\n\n"));
                }
                text.push_str("data: [DONE]\n\n");
                let mut points: Vec<usize> = cuts.iter().map(|i| i.index(text.len() + 1)).collect();
                points.sort_unstable();
                let mut frames = Vec::new();
                let mut at = 0;
                for point in points {
                    frames.push(text[at..point].to_string());
                    at = point;
                }
                frames.push(text[at..].to_string());
                let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
                let out = runtime.block_on(async {
                    let stream = futures_util::stream::iter(frames.into_iter().map(|f| {
                        Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(f)))
                    }));
                    StripUsageChunk::new(StreamBody::new(stream))
                        .collect()
                        .await
                        .unwrap()
                        .to_bytes()
                });
                prop_assert_eq!(out, Bytes::from(text));
            }
        }
    }
}
