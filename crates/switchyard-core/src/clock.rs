use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Monotonic time source. Time-based logic (hysteresis, breakers, ramps, leases)
/// takes a `Clock` so tests can move time by hand instead of sleeping.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to; clones share the same time.
#[derive(Clone, Debug)]
pub struct ManualClock {
    now: Arc<Mutex<Instant>>,
}

impl ManualClock {
    pub fn new() -> Self {
        Self {
            now: Arc::new(Mutex::new(Instant::now())),
        }
    }

    pub fn advance(&self, by: Duration) {
        *self.now.lock() += by;
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        *self.now.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_advanced_and_clones_share_time() {
        let clock = ManualClock::new();
        let copy = clock.clone();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        copy.advance(Duration::from_secs(30));
        assert_eq!(clock.now() - t0, Duration::from_secs(30));
    }
}
