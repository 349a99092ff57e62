//! Test-only: a disk whose fsync stalls, injected before the log store's durable appends
//! (one handle per node) or before the spend journal's syncs (another handle). Each is shared
//! between the writer that asks it before each sync and whoever sets it (the gateway's chaos
//! endpoint, tests). Off unless set; production never sets it.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchyard_core::Clock;

/// The stall in force: how long a flush sleeps, and until when a flush that starts sleeps.
#[derive(Clone, Copy, Debug)]
struct Window {
    stall: Duration,
    /// Flushes starting at or after this instant are not stalled; `None`: until cleared.
    until: Option<Instant>,
}

/// Test-only stall before every Raft log flush that starts within a window.
pub struct FlushStall {
    clock: Arc<dyn Clock>,
    window: Mutex<Option<Window>>,
}

impl FlushStall {
    /// Off until [`set`](Self::set); `clock` decides which flushes start inside a window.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            window: Mutex::new(None),
        }
    }

    /// Every flush that starts within `window` from now (`None`: until the next call) sleeps
    /// `stall` first; a zero `stall` clears it. A flush already sleeping finishes its sleep.
    pub fn set(&self, stall: Duration, window: Option<Duration>) {
        let next = (!stall.is_zero()).then(|| Window {
            stall,
            // A window too long to represent never ends.
            until: window.and_then(|w| self.clock.now().checked_add(w)),
        });
        *self.window.lock() = next;
    }

    /// How long a flush starting now sleeps first (zero outside a window).
    pub fn stall_now(&self) -> Duration {
        let Some(window) = *self.window.lock() else {
            return Duration::ZERO;
        };
        match window.until {
            Some(until) if self.clock.now() >= until => Duration::ZERO,
            _ => window.stall,
        }
    }
}

impl std::fmt::Debug for FlushStall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushStall")
            .field("window", &*self.window.lock())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::ManualClock;

    const STALL: Duration = Duration::from_millis(1500);

    #[test]
    fn off_until_set_and_cleared_by_a_zero_stall() {
        let stall = FlushStall::new(Arc::new(ManualClock::new()));
        assert_eq!(stall.stall_now(), Duration::ZERO);
        stall.set(STALL, None);
        assert_eq!(stall.stall_now(), STALL);
        stall.set(Duration::ZERO, None);
        assert_eq!(stall.stall_now(), Duration::ZERO);
    }

    #[test]
    fn only_flushes_starting_inside_the_window_stall() {
        let clock = ManualClock::new();
        let stall = FlushStall::new(Arc::new(clock.clone()));
        stall.set(STALL, Some(Duration::from_millis(300)));
        clock.advance(Duration::from_millis(299));
        assert_eq!(stall.stall_now(), STALL);
        clock.advance(Duration::from_millis(1));
        assert_eq!(stall.stall_now(), Duration::ZERO);
        // A new window starts from the time it is set.
        stall.set(STALL, Some(Duration::from_millis(300)));
        assert_eq!(stall.stall_now(), STALL);
    }

    #[test]
    fn without_a_window_the_stall_lasts_until_cleared() {
        let clock = ManualClock::new();
        let stall = FlushStall::new(Arc::new(clock.clone()));
        stall.set(STALL, None);
        clock.advance(Duration::from_secs(3600));
        assert_eq!(stall.stall_now(), STALL);
    }
}
