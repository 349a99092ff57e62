//! Wall-aligned time units. Peak windows are daily UTC times and budget periods are UTC days;
//! the clock itself is `switchyard_core::WallClock`, which tests drive by hand.

/// Milliseconds since the Unix epoch; the one time unit stored in this crate's state.
pub type UnixMillis = u64;

pub(crate) const MS_PER_DAY: u64 = 86_400_000;

pub(crate) fn secs_to_ms(secs: u64) -> u64 {
    secs.saturating_mul(1000)
}
