//! What the request path learns when a response has ended: the tokens it was settled with
//! and, when the hook asked for it, the body (a stream's SSE bytes as sent) — to book spend
//! by purpose and fill the response cache; bounded, and nothing is copied unless asked.

use bytes::{Bytes, BytesMut};
use http::StatusCode;

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
