//! Span ids, shared by the span layer and the attempt stage that forwards one in `traceparent`.

/// A fresh non-zero span id, 16 lowercase hex digits.
pub fn new_span_id() -> String {
    format!("{:016x}", rand::random::<u64>().max(1))
}
