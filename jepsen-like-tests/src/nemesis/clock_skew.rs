//! Clock skew. The suite tells a node to skew its clock through
//! [`crate::cluster::Cluster::skew_clock`] (for process clusters,
//! [`crate::cluster::NodeApi::skew_clock`], whose transport is left to the adapter, e.g. a debug
//! admin endpoint). The node side is [`SkewedClock`]: a `switchyard_core::Clock` whose offset
//! can be moved at runtime, for the gateway to install behind that endpoint.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::Clock;

/// A clock running `offset` ahead of (or behind) `base`; clones share the offset.
#[derive(Clone, Debug)]
pub struct SkewedClock<C: Clock> {
    base: C,
    offset_ms: Arc<AtomicI64>,
}

impl<C: Clock> SkewedClock<C> {
    pub fn new(base: C) -> Self {
        Self {
            base,
            offset_ms: Arc::new(AtomicI64::new(0)),
        }
    }

    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::SeqCst);
    }

    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::SeqCst)
    }
}

impl<C: Clock> Clock for SkewedClock<C> {
    fn now(&self) -> Instant {
        let now = self.base.now();
        let offset = self.offset_ms();
        let magnitude = Duration::from_millis(offset.unsigned_abs());
        let skewed = if offset >= 0 {
            now.checked_add(magnitude)
        } else {
            now.checked_sub(magnitude)
        };
        // An offset past the representable range pins the clock rather than panicking.
        skewed.unwrap_or(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::ManualClock;

    #[test]
    fn skewed_clock_follows_base_plus_offset() {
        let base = ManualClock::new();
        let clock = SkewedClock::new(base.clone());
        let t0 = base.now();
        assert_eq!(clock.now(), t0);
        clock.set_offset_ms(1_500);
        assert_eq!(clock.now() - t0, Duration::from_millis(1_500));
        base.advance(Duration::from_secs(10));
        clock.set_offset_ms(-2_000);
        assert_eq!(clock.now() - t0, Duration::from_secs(8));
        clock.set_offset_ms(0);
        assert_eq!(clock.now() - t0, Duration::from_secs(10));
    }
}
