//! Wall-aligned time. Peak windows are daily UTC times and budget periods are UTC days, but
//! tests must drive time by hand: the wall time is read once at construction and an injected
//! monotonic [`Clock`] carries it forward (immune to wall-clock steps afterwards).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use switchyard_core::{Clock, SystemClock};

/// Milliseconds since the Unix epoch; the one time unit stored in this crate's state.
pub type UnixMillis = u64;

pub(crate) const MS_PER_DAY: u64 = 86_400_000;

#[derive(Clone)]
pub struct WallClock {
    clock: Arc<dyn Clock>,
    origin: Instant,
    unix_at_origin: Duration,
}

impl WallClock {
    /// The real clocks.
    pub fn system() -> Self {
        let unix_now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        Self::new(Arc::new(SystemClock), unix_now)
    }

    /// `clock` reads `unix_at_origin` (time since the Unix epoch) right now.
    pub fn new(clock: Arc<dyn Clock>, unix_at_origin: Duration) -> Self {
        let origin = clock.now();
        Self {
            clock,
            origin,
            unix_at_origin,
        }
    }

    pub fn instant(&self) -> Instant {
        self.clock.now()
    }

    pub fn unix_now(&self) -> Duration {
        self.unix_at_origin + self.clock.now().saturating_duration_since(self.origin)
    }

    pub fn unix_millis(&self) -> UnixMillis {
        u64::try_from(self.unix_now().as_millis()).unwrap_or(u64::MAX)
    }
}

impl std::fmt::Debug for WallClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WallClock")
            .field("unix_now", &self.unix_now())
            .finish()
    }
}

pub(crate) fn secs_to_ms(secs: u64) -> u64 {
    secs.saturating_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::ManualClock;

    #[test]
    fn wall_time_moves_with_the_injected_clock() {
        let manual = ManualClock::new();
        let wall = WallClock::new(Arc::new(manual.clone()), Duration::from_secs(1_000));
        assert_eq!(wall.unix_millis(), 1_000_000);
        manual.advance(Duration::from_millis(1_500));
        assert_eq!(wall.unix_millis(), 1_001_500);
    }
}
