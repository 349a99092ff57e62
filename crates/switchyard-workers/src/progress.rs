//! How long a busy worker has been silent: the input of hung-engine detection.
//!
//! A worker whose HTTP server answers `/health` while its engine is stuck accepts requests
//! and never sends a byte. The request path reports every byte it receives
//! ([`WorkerHandle::note_progress`]) and, per request, when its bytes are due
//! ([`InFlightGuard::expect_bytes_within`]: at once for a stream, after the whole generation
//! for a non-streaming answer, whose first byte is its last). A worker is silent when some
//! request on it is past due and no byte came from any request for a while; the silence is
//! counted from the later of the last byte and the moment the worker last went from idle to
//! busy, so an idle spell never counts.

use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::Clock;

use crate::handle::{InFlightGuard, WorkerHandle};

/// Timestamps as nanoseconds since the tracker's epoch on the registry's clock.
pub(crate) struct Progress {
    clock: Arc<dyn Clock>,
    epoch: Instant,
    last_byte: AtomicU64,
    busy_since: AtomicU64,
    next_key: AtomicU64,
    /// (due, key) of every in-flight request that said when its bytes are due.
    due: Mutex<BTreeSet<(u64, u64)>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("last_byte_ns", &self.last_byte.load(Ordering::Relaxed))
            .field("busy_since_ns", &self.busy_since.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Progress {
    pub(crate) fn new(clock: Arc<dyn Clock>) -> Self {
        let epoch = clock.now();
        Self {
            clock,
            epoch,
            last_byte: AtomicU64::new(0),
            busy_since: AtomicU64::new(0),
            next_key: AtomicU64::new(0),
            due: Mutex::new(BTreeSet::new()),
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn now_nanos(&self) -> u64 {
        self.nanos(self.clock.now())
    }

    pub(crate) fn byte(&self) {
        self.last_byte
            .fetch_max(self.now_nanos(), Ordering::Relaxed);
    }

    pub(crate) fn became_busy(&self) {
        self.busy_since
            .fetch_max(self.now_nanos(), Ordering::Relaxed);
    }

    /// Registers a request whose bytes are due `within` from now; the key unregisters it.
    pub(crate) fn expect(&self, within: Duration) -> (u64, u64) {
        let due = self.nanos(self.clock.now() + within);
        let key = (due, self.next_key.fetch_add(1, Ordering::Relaxed));
        self.due.lock().insert(key);
        key
    }

    pub(crate) fn forget(&self, key: (u64, u64)) {
        self.due.lock().remove(&key);
    }

    /// How long the worker has sent nothing while some request on it is past due.
    pub(crate) fn silence(&self) -> Option<Duration> {
        let now = self.now_nanos();
        let earliest_due = self.due.lock().first().map(|(due, _)| *due)?;
        if earliest_due > now {
            return None;
        }
        let since = self
            .last_byte
            .load(Ordering::Relaxed)
            .max(self.busy_since.load(Ordering::Relaxed));
        Some(Duration::from_nanos(now.saturating_sub(since)))
    }
}

impl WorkerHandle {
    /// The request path received bytes (headers or body) from this worker. Lock-free.
    pub fn note_progress(&self) {
        self.progress.byte();
    }

    /// How long this worker has sent nothing while a request on it is past due, if one is.
    pub fn silence(&self) -> Option<Duration> {
        self.progress.silence()
    }
}

impl InFlightGuard {
    /// This request's bytes are due `within` from now (zero for a stream, the expected
    /// generation time for a non-streaming answer); once past due, the worker's silence
    /// counts toward a hung verdict. A request that never says so never makes it hung.
    pub fn expect_bytes_within(&mut self, within: Duration) {
        if let Some(key) = self.due_key.take() {
            self.worker.progress.forget(key);
        }
        self.due_key = Some(self.worker.progress.expect(within));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::ManualClock;

    #[test]
    fn silence_counts_from_the_last_byte_or_the_start_of_the_busy_spell() {
        let clock = ManualClock::new();
        let progress = Progress::new(Arc::new(clock.clone()));
        assert_eq!(progress.silence(), None, "idle is never silent");
        clock.advance(Duration::from_secs(60));
        progress.became_busy();
        let key = progress.expect(Duration::ZERO);
        clock.advance(Duration::from_millis(300));
        assert_eq!(progress.silence(), Some(Duration::from_millis(300)));
        progress.byte();
        clock.advance(Duration::from_millis(100));
        assert_eq!(progress.silence(), Some(Duration::from_millis(100)));
        progress.forget(key);
        assert_eq!(progress.silence(), None, "nothing is due any more");
    }

    #[test]
    fn a_request_not_yet_due_does_not_make_the_worker_silent() {
        let clock = ManualClock::new();
        let progress = Progress::new(Arc::new(clock.clone()));
        progress.became_busy();
        let long = progress.expect(Duration::from_secs(10));
        clock.advance(Duration::from_secs(4));
        assert_eq!(progress.silence(), None, "a long non-streaming answer");
        // A later stream is due at once: its silence counts from the last byte.
        progress.expect(Duration::ZERO);
        assert_eq!(progress.silence(), Some(Duration::from_secs(4)));
        progress.forget(long);
    }
}
