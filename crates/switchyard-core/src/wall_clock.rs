use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::clock::{Clock, SystemClock};

/// Time since the Unix epoch, advanced by an injected monotonic [`Clock`].
///
/// Hot-key time slices, peak windows and budget days must start at the same moment on every
/// gateway replica; monotonic `Instant`s have no shared origin, so the wall time is read once
/// at construction and the monotonic clock carries it forward (immune to wall-clock steps
/// afterwards, and drivable by a `ManualClock` in tests).
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

    /// The monotonic time of the injected clock.
    pub fn instant(&self) -> Instant {
        self.clock.now()
    }

    /// Time since the Unix epoch.
    pub fn unix_now(&self) -> Duration {
        self.unix_at_origin + self.clock.now().saturating_duration_since(self.origin)
    }

    pub fn unix_millis(&self) -> u64 {
        u64::try_from(self.unix_now().as_millis()).unwrap_or(u64::MAX)
    }
}

impl Default for WallClock {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for WallClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WallClock")
            .field("unix_now", &self.unix_now())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    #[test]
    fn unix_time_advances_with_the_injected_clock_only() {
        let manual = ManualClock::new();
        let wall = WallClock::new(Arc::new(manual.clone()), Duration::from_secs(1_000));
        assert_eq!(wall.unix_millis(), 1_000_000);
        manual.advance(Duration::from_millis(1_500));
        assert_eq!(wall.unix_millis(), 1_001_500);
    }
}
