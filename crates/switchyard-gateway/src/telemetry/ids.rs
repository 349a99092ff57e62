//! Span ids, shared by the span layer and the attempt stage that forwards one in `traceparent`.

use std::fmt;

/// A fresh non-zero span id, 16 lowercase hex digits (what `{:016x}` prints, without the
/// formatting machinery).
pub fn new_span_id() -> String {
    SpanId::fresh().as_str().to_string()
}

/// A span id's 16 hex digits held on the stack: every attempt makes one, and building it as
/// a `String` one character at a time cost as much as the rest of its `traceparent`.
#[derive(Clone, Copy)]
pub struct SpanId([u8; 16]);

impl SpanId {
    /// A fresh non-zero span id.
    pub fn fresh() -> Self {
        Self::of(rand::random::<u64>().max(1))
    }

    fn of(value: u64) -> Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; 16];
        for (index, digit) in text.iter_mut().enumerate() {
            let shift = (15 - index) * 4;
            *digit = DIGITS[((value >> shift) & 0xf) as usize];
        }
        Self(text)
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever written, so this never falls back.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for SpanId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_ids_are_what_the_formatter_prints() {
        for value in [1u64, 0xabc, 0x00f0_67aa_0ba9_02b7, u64::MAX] {
            let id = SpanId::of(value);
            assert_eq!(id.as_str(), format!("{value:016x}"));
            assert_eq!(id.to_string(), format!("{value:016x}"));
        }
        let id = new_span_id();
        assert_eq!(id.len(), 16);
        assert_ne!(id, "0000000000000000");
        assert_ne!(SpanId::fresh().as_str(), "0000000000000000");
    }
}
