//! Span ids, shared by the span layer and the attempt stage that forwards one in `traceparent`.

/// A fresh non-zero span id, 16 lowercase hex digits (what `{:016x}` prints, without the
/// formatting machinery: every attempt makes one).
pub fn new_span_id() -> String {
    hex16(rand::random::<u64>().max(1))
}

fn hex16(value: u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    (0..16)
        .rev()
        .map(|shift| char::from(DIGITS[((value >> (shift * 4)) & 0xf) as usize]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_ids_are_what_the_formatter_prints() {
        for value in [1u64, 0xabc, 0x00f0_67aa_0ba9_02b7, u64::MAX] {
            assert_eq!(hex16(value), format!("{value:016x}"));
        }
        let id = new_span_id();
        assert_eq!(id.len(), 16);
        assert_ne!(id, "0000000000000000");
    }
}
