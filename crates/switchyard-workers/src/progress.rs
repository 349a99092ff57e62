//! How long a busy worker has been silent: the input of hung-engine detection.
//!
//! A worker whose HTTP server answers `/health` while its engine is stuck accepts requests
//! and never sends a byte. The request path reports every byte it receives
//! (`WorkerHandle::note_progress`) and, per request, when its bytes are due
//! (`InFlightGuard::expect_bytes_within`: at once for a stream, after the whole generation
//! for a non-streaming answer, whose first byte is its last). A worker is silent when some
//! request on it is past due and no byte came from any request for a while; the silence is
//! counted from the later of the last byte and the moment the worker last went from idle to
//! busy, so an idle spell never counts.
//!
//! A worker can also stall each stream after its first chunks: new streams keep it from
//! ever being silent. So every stream that has started its answer reports its own chunks
//! (`InFlightGuard::note_chunk`) and every answer that ends well says so
//! (`InFlightGuard::note_completed`); the supervisor reads both ([`StreamCensus`]).

use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::Clock;

/// Timestamps as nanoseconds since the tracker's epoch on the registry's clock.
pub(crate) struct Progress {
    clock: Arc<dyn Clock>,
    epoch: Instant,
    last_byte: AtomicU64,
    busy_since: AtomicU64,
    /// The last answer that ended well (0: none yet).
    last_completion: AtomicU64,
    next_key: AtomicU64,
    /// (due, key) of every in-flight request that said when its bytes are due.
    due: Mutex<BTreeSet<(u64, u64)>>,
    /// The first chunk and the (shared) last chunk of every in-flight stream that has
    /// started its answer, by key.
    streams: Mutex<HashMap<u64, (u64, Arc<AtomicU64>)>>,
}

/// The streams in flight on a worker that have started their answer, as the supervisor
/// reads them.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct StreamCensus {
    pub streams: Vec<StreamMark>,
    /// When an answer from this worker last ended well.
    pub last_completion: Option<Instant>,
}

/// When one stream's first and last chunks arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StreamMark {
    pub first: Instant,
    pub last: Instant,
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
            last_completion: AtomicU64::new(0),
            next_key: AtomicU64::new(0),
            due: Mutex::new(BTreeSet::new()),
            streams: Mutex::new(HashMap::new()),
        }
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    fn now_nanos(&self) -> u64 {
        self.nanos(self.clock.now())
    }

    fn instant(&self, nanos: u64) -> Instant {
        self.epoch + Duration::from_nanos(nanos)
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

    /// A chunk of a stream's answer arrived; the first one registers the stream.
    pub(crate) fn chunk(&self, stream: &mut Option<(u64, Arc<AtomicU64>)>) {
        let now = self.now_nanos();
        self.last_byte.fetch_max(now, Ordering::Relaxed);
        match stream {
            Some((_, last)) => last.store(now, Ordering::Relaxed),
            None => {
                let key = self.next_key.fetch_add(1, Ordering::Relaxed);
                let last = Arc::new(AtomicU64::new(now));
                self.streams.lock().insert(key, (now, Arc::clone(&last)));
                *stream = Some((key, last));
            }
        }
    }

    pub(crate) fn stream_ended(&self, key: u64) {
        self.streams.lock().remove(&key);
    }

    pub(crate) fn completed(&self) {
        self.last_completion
            .fetch_max(self.now_nanos(), Ordering::Relaxed);
    }

    /// The probes have just shown the worker answering again: requests that were already
    /// overdue and streams already stuck are no longer evidence against it (they end at
    /// their own deadlines), or the worker would be marked hung again at once.
    pub(crate) fn forgive(&self) {
        let now = self.now_nanos();
        self.due.lock().retain(|(due, _)| *due > now);
        self.streams
            .lock()
            .retain(|_, (_, last)| last.load(Ordering::Relaxed) > now);
        self.last_byte.fetch_max(now, Ordering::Relaxed);
    }

    pub(crate) fn census(&self) -> StreamCensus {
        let streams = self
            .streams
            .lock()
            .values()
            .map(|(first, last)| StreamMark {
                first: self.instant(*first),
                last: self.instant(last.load(Ordering::Relaxed)),
            })
            .collect();
        let completion = self.last_completion.load(Ordering::Relaxed);
        StreamCensus {
            streams,
            last_completion: (completion > 0).then(|| self.instant(completion)),
        }
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

    #[test]
    fn streams_are_counted_from_their_first_chunk_until_they_end_or_are_forgiven() {
        let clock = ManualClock::new();
        let progress = Progress::new(Arc::new(clock.clone()));
        let mut waiting = None;
        assert!(progress.census().streams.is_empty());
        let mut answering = None;
        progress.chunk(&mut answering);
        let first = clock.now();
        clock.advance(Duration::from_millis(30));
        progress.chunk(&mut answering);
        let census = progress.census();
        assert_eq!(
            census.streams,
            vec![StreamMark {
                first,
                last: clock.now()
            }]
        );
        assert_eq!(census.last_completion, None);
        progress.completed();
        assert_eq!(progress.census().last_completion, Some(clock.now()));
        // Forgiven: a stream stuck before the probes confirmed the worker no longer counts,
        // and neither does a request already overdue.
        progress.chunk(&mut waiting);
        let overdue = progress.expect(Duration::ZERO);
        clock.advance(Duration::from_secs(5));
        progress.forgive();
        assert!(progress.census().streams.is_empty());
        assert_eq!(progress.silence(), None);
        progress.forget(overdue);
        let (key, _) = answering.take().unwrap();
        progress.stream_ended(key);
        assert!(progress.census().streams.is_empty());
    }
}
