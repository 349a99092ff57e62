//! W3C Trace Context for upstream calls: the `traceparent` each worker attempt carries.
//!
//! A valid client `traceparent` keeps its trace id and flags; otherwise the trace id is taken
//! from the request id (a UUID's 32 hex digits, or a hash of any other id), so every attempt of
//! one request, and its log lines, share one trace. Each attempt gets a fresh parent id.

use http::{HeaderMap, HeaderValue};
use std::hash::Hasher;

use crate::headers::TRACEPARENT;

/// The trace id and flags of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: String,
    /// The client's span (its `traceparent` parent id); empty when it sent none.
    pub parent_id: String,
    pub flags: String,
}

impl TraceContext {
    /// The client's context when its `traceparent` is valid, else one derived from
    /// `request_id` (sampled).
    pub fn for_request(headers: &HeaderMap, request_id: &str) -> Self {
        headers
            .get(TRACEPARENT)
            .and_then(|v| v.to_str().ok())
            .and_then(parse)
            .unwrap_or_else(|| Self {
                trace_id: trace_id_from(request_id),
                parent_id: String::new(),
                flags: "01".into(),
            })
    }

    /// Whether the client sent this context in a valid `traceparent` (else it was derived from
    /// the request id).
    pub fn is_from_client(&self) -> bool {
        !self.parent_id.is_empty()
    }

    /// The header for one upstream attempt, with a fresh parent (span) id.
    pub fn child_header(&self) -> HeaderValue {
        let mut span_id = Vec::with_capacity(16);
        push_hex(&mut span_id, nonzero(rand::random::<u64>()));
        self.header_for(std::str::from_utf8(&span_id).unwrap_or_default())
    }

    /// The header naming `span_id` (the attempt's span) as the worker's parent.
    pub fn header_for(&self, span_id: &str) -> HeaderValue {
        // Assembled in one buffer: this runs for every attempt, and formatting machinery
        // plus temporary strings cost more than the rest of the header's life.
        let mut text = Vec::with_capacity(HEADER_LEN);
        text.extend_from_slice(b"00-");
        text.extend_from_slice(self.trace_id.as_bytes());
        text.push(b'-');
        text.extend_from_slice(span_id.as_bytes());
        text.push(b'-');
        text.extend_from_slice(self.flags.as_bytes());
        HeaderValue::from_maybe_shared(bytes::Bytes::from(text))
            .unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// `version-traceid-parentid-flags`, version 00 (later versions may append fields).
fn parse(value: &str) -> Option<TraceContext> {
    let mut parts = value.trim().split('-');
    let version = parts.next()?;
    let trace_id = parts.next()?;
    let parent_id = parts.next()?;
    let flags = parts.next()?;
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let valid = hex(version, 2)
        && version != "ff"
        && (version != "00" || parts.next().is_none())
        && hex(trace_id, 32)
        && trace_id.bytes().any(|b| b != b'0')
        && hex(parent_id, 16)
        && parent_id.bytes().any(|b| b != b'0')
        && hex(flags, 2);
    valid.then(|| TraceContext {
        trace_id: trace_id.to_string(),
        parent_id: parent_id.to_string(),
        flags: flags.to_string(),
    })
}

fn trace_id_from(request_id: &str) -> String {
    if let Some(digits) = hex_digits(request_id) {
        return digits;
    }
    // Fixed keys: the same request id always maps to the same trace id.
    let hash = |seed: u64| {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        hasher.write_u64(seed);
        hasher.write(request_id.as_bytes());
        nonzero(hasher.finish())
    };
    format!("{:016x}{:016x}", hash(1), hash(2))
}

/// `request_id` without its dashes, lower-cased, when that is 32 hex digits not all zero (a
/// UUID's): checked byte by byte on the stack, where collecting it character by character
/// first cost more than the rest of the trace context.
fn hex_digits(request_id: &str) -> Option<String> {
    let mut digits = [0u8; 32];
    let mut len = 0;
    for byte in request_id.bytes().filter(|b| *b != b'-') {
        if len == digits.len() || !byte.is_ascii_hexdigit() {
            return None;
        }
        digits[len] = byte.to_ascii_lowercase();
        len += 1;
    }
    if len < digits.len() || digits.iter().all(|b| *b == b'0') {
        return None;
    }
    String::from_utf8(digits.to_vec()).ok()
}

fn nonzero(value: u64) -> u64 {
    value.max(1)
}

/// `00-` + trace id + `-` + parent id + `-` + flags.
const HEADER_LEN: usize = 3 + 32 + 1 + 16 + 1 + 2;

/// `value` as 16 lower-case hex digits (what `{:016x}` prints).
fn push_hex(out: &mut Vec<u8>, value: u64) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for shift in (0..16).rev() {
        out.push(DIGITS[((value >> (shift * 4)) & 0xf) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(TRACEPARENT, HeaderValue::from_str(value).expect("header"));
        headers
    }

    fn fields(value: &HeaderValue) -> Vec<String> {
        value
            .to_str()
            .expect("ascii")
            .split('-')
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_valid_client_traceparent_keeps_trace_and_flags_with_a_new_parent() {
        let client = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";
        let ctx = TraceContext::for_request(&headers(client), "req-1");
        let header = ctx.child_header();
        let parts = fields(&header);
        assert_eq!(parts[0], "00");
        assert_eq!(parts[1], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(parts[2], "00f067aa0ba902b7");
        assert_eq!(parts[2].len(), 16);
        assert_eq!(parts[3], "00");
    }

    #[test]
    fn parent_ids_are_sixteen_hex_digits_like_the_formatter_prints() {
        for value in [1u64, 0xabc, 0x00f0_67aa_0ba9_02b7, u64::MAX] {
            let mut out = Vec::new();
            push_hex(&mut out, value);
            assert_eq!(String::from_utf8(out).unwrap(), format!("{value:016x}"));
        }
        let ctx = TraceContext::for_request(&HeaderMap::new(), "req-1");
        assert_eq!(ctx.child_header().len(), HEADER_LEN);
    }

    #[test]
    fn invalid_traceparents_are_replaced() {
        for bad in [
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "garbage",
        ] {
            let ctx =
                TraceContext::for_request(&headers(bad), "3f2b8c1e-0000-4000-8000-00000000abcd");
            assert_eq!(ctx.trace_id, "3f2b8c1e00004000800000000000abcd", "{bad}");
        }
    }

    #[test]
    fn without_a_traceparent_the_trace_id_follows_the_request_id() {
        let uuid = "3f2b8c1e-9a4d-4e5f-8a6b-7c8d9e0f1a2b";
        let ctx = TraceContext::for_request(&HeaderMap::new(), uuid);
        assert_eq!(ctx.trace_id, "3f2b8c1e9a4d4e5f8a6b7c8d9e0f1a2b");
        assert_eq!(ctx.flags, "01");
        let other = TraceContext::for_request(&HeaderMap::new(), "req-42");
        assert_eq!(other.trace_id.len(), 32);
        assert_eq!(
            other,
            TraceContext::for_request(&HeaderMap::new(), "req-42"),
            "stable across attempts"
        );
        assert_ne!(
            other.trace_id,
            TraceContext::for_request(&HeaderMap::new(), "req-43").trace_id
        );
    }

    /// The request id's digits as first defined: its characters but dashes, lower-cased,
    /// when that is 32 hex digits not all zero.
    fn digits_char_by_char(request_id: &str) -> Option<String> {
        let digits: String = request_id
            .chars()
            .filter(|c| *c != '-')
            .map(|c| c.to_ascii_lowercase())
            .collect();
        (digits.len() == 32
            && digits.bytes().all(|b| b.is_ascii_hexdigit())
            && digits.bytes().any(|b| b != b'0'))
        .then_some(digits)
    }

    proptest::proptest! {
        #[test]
        fn request_ids_give_the_digits_of_the_char_by_char_definition(
            id in "([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}|[0-9a-fA-F-]{28,40}|[0-9a-fA-F\u{e9}\u{212a}-]{30,36}|-*0{32}-*|.{0,40})",
        ) {
            let expected = digits_char_by_char(&id);
            proptest::prop_assert_eq!(hex_digits(&id), expected.clone());
            let trace_id = trace_id_from(&id);
            proptest::prop_assert_eq!(trace_id.len(), 32);
            if let Some(digits) = expected {
                proptest::prop_assert_eq!(trace_id, digits);
            }
        }
    }
}
