//! Settle: what the end of a response books. The admission permit is settled with the real
//! usage by the metered body; the hook built here is then told how the response ended (the
//! tokens settled and, when it asked, the body — a stream's SSE bytes as sent, bounded) to
//! book spend by purpose and fill the response cache. Before the body flows, the answer gets
//! the degradation disclosure and warmup learns which of its resources it used.

use axum::response::Response;
use bytes::{Bytes, BytesMut};
use http::{HeaderValue, StatusCode};
use std::sync::Arc;
use switchyard_warmup::downgrade::completion_from_sse;

use super::context::RequestContext;
use super::degrade::Planned;
use crate::headers;
use crate::metrics::degradation::CACHE_FILLS;
use crate::state::WarmupRuntime;

/// Largest answer copied for the response cache (the cache itself keeps less per shard);
/// also the bound on the text assembled from a streamed answer.
const MAX_CAPTURE_BYTES: usize = 4 << 20;
/// Largest streamed answer copied for the response cache: SSE framing costs several times
/// the text (a JSON chunk per token), and every open stream holds its copy until it ends.
const MAX_STREAM_CAPTURE_BYTES: usize = 1 << 20;

/// How one response ended.
#[derive(Debug)]
pub struct Finished {
    pub status: StatusCode,
    /// The tokens admission settled: the worker's reported usage, else the estimate.
    pub tokens: u64,
    /// The worker's body broke, or the client went away before the end.
    pub incomplete: bool,
    /// The whole body (for a stream, its SSE bytes), when capture was asked for and it fit.
    pub body: Option<Bytes>,
}

/// Called once when the response ends (or is dropped unfinished).
pub struct FinishHook {
    /// Capture up to this many body bytes (0: none). Longer bodies are not captured at all.
    pub capture_limit: usize,
    pub callback: Box<dyn FnOnce(Finished) + Send + Sync>,
}

impl FinishHook {
    pub fn new(
        capture_limit: usize,
        callback: impl FnOnce(Finished) + Send + Sync + 'static,
    ) -> Self {
        Self {
            capture_limit,
            callback: Box::new(callback),
        }
    }
}

/// Books the settled spend by purpose and offers a successful answer to the response cache:
/// a non-streaming body as is, a stream assembled from its SSE deltas (only a stream that
/// finished with `[DONE]`; tool calls and oversized text are not cached).
pub(super) fn hook(runtime: &WarmupRuntime, planned: &Planned) -> FinishHook {
    let manager = runtime.manager.clone();
    let purpose = planned.tags.purpose;
    let fill = planned.cache_key.clone().map(|key| {
        (
            key,
            Arc::clone(&runtime.cache),
            Arc::clone(&runtime.metrics),
            planned.parsed.model.clone(),
        )
    });
    let stream = planned.parsed.stream;
    let limit = match (&fill, stream) {
        (None, _) => 0,
        (Some(_), true) => MAX_STREAM_CAPTURE_BYTES,
        (Some(_), false) => MAX_CAPTURE_BYTES,
    };
    FinishHook::new(limit, move |finished| {
        manager.note_spend(purpose, finished.tokens);
        let Some((key, cache, metrics, model)) = fill else {
            return;
        };
        // Indices into `CACHE_FILLS`: stored, not captured, not ok.
        let outcome = if !finished.status.is_success() || finished.incomplete {
            2
        } else {
            let body = finished.body.and_then(|body| {
                if stream {
                    completion_from_sse(&body, MAX_CAPTURE_BYTES)
                } else {
                    // The captured bytes are this body's alone: taken, not copied.
                    String::from_utf8(Vec::from(body)).ok()
                }
            });
            match body {
                Some(body) => {
                    cache.insert(key, &model, body);
                    0
                }
                _ => 1,
            }
        };
        metrics.cache_fills.get(outcome, CACHE_FILLS[outcome]).inc();
    })
}

/// Adds the downgrade disclosure and tells warmup which resources the answer used.
pub(super) fn disclose(
    runtime: &WarmupRuntime,
    ctx: &RequestContext<'_>,
    planned: &Planned,
    response: &mut Response,
) {
    let headers = response.headers_mut();
    for (name, value) in &planned.disclosure {
        if let Ok(value) = HeaderValue::from_str(value) {
            headers.insert(*name, value);
        }
    }
    let Some(text) = &planned.text else {
        return;
    };
    if !response.status().is_success() {
        return;
    }
    let worker = response
        .headers()
        .get(headers::WORKER)
        .and_then(|v| v.to_str().ok());
    let latency = ctx.started.elapsed();
    for name in runtime
        .manager
        .resources_for(&planned.parsed.model, text, worker)
    {
        runtime.manager.note_use(&name, Some(latency));
    }
}

/// A bounded copy of a body as it streams by; gives up (and frees) once it would overflow.
#[derive(Debug)]
pub(crate) struct Capture {
    limit: usize,
    bytes: Option<BytesMut>,
}

impl Capture {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            bytes: (limit > 0).then(BytesMut::new),
        }
    }

    pub(crate) fn observe(&mut self, data: &[u8]) {
        if let Some(bytes) = &mut self.bytes {
            if bytes.len() + data.len() > self.limit {
                self.bytes = None;
            } else {
                bytes.extend_from_slice(data);
            }
        }
    }

    pub(crate) fn take(&mut self) -> Option<Bytes> {
        self.bytes.take().map(BytesMut::freeze)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_bodies_that_fit_and_drops_those_that_do_not() {
        let mut fits = Capture::new(8);
        fits.observe(b"abcd");
        fits.observe(b"efgh");
        assert_eq!(fits.take().as_deref(), Some(&b"abcdefgh"[..]));
        let mut overflows = Capture::new(8);
        overflows.observe(b"abcdefgh");
        overflows.observe(b"i");
        overflows.observe(b"j");
        assert_eq!(overflows.take(), None);
        assert_eq!(Capture::new(0).take(), None, "capture off");
    }
}
