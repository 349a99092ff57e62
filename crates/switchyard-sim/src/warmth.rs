//! The cold-start model: an engine that sat idle long enough has unloaded its model (or lost
//! its CUDA graphs) and must load it again before it can prefill anything. The next request
//! pays the load; requests arriving while it loads wait for that same load, not a new one.
//!
//! Plain data kept inside the engine's lock, driven by tokio's clock so tests can pause it.

use std::time::Duration;

use tokio::time::Instant;

/// What a newly arrived request learns about the engine's warmth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// The request may not start its prefill before this instant (the model is loading).
    pub(crate) ready_at: Option<Instant>,
    /// This arrival found the engine cold and started the load.
    pub(crate) started_wake: bool,
}

#[derive(Debug)]
pub(crate) struct Warmth {
    cold_start: Duration,
    cold_after: Duration,
    /// When the latest load finishes (or finished); `None`: never loaded.
    loaded_at: Option<Instant>,
    /// Last arrival or departure of a request.
    last_activity: Option<Instant>,
    /// Requests alive in the engine (waking, queued, running).
    in_flight: usize,
}

impl Warmth {
    /// A zero `cold_start` disables the model: every arrival finds the engine warm.
    pub(crate) fn new(cold_start: Duration, cold_after: Duration) -> Self {
        Self {
            cold_start,
            cold_after,
            loaded_at: None,
            last_activity: None,
            in_flight: 0,
        }
    }

    /// Registers a request arriving at `now`. The caller empties the prefix cache when
    /// `started_wake` is set: a reloaded engine has no KV cache.
    pub(crate) fn arrive(&mut self, now: Instant) -> Arrival {
        let cold = self.is_cold(now);
        if cold {
            self.loaded_at = Some(now + self.cold_start);
        }
        self.in_flight += 1;
        self.last_activity = Some(now);
        Arrival {
            ready_at: self.loaded_at.filter(|&at| at > now),
            started_wake: cold,
        }
    }

    /// A request left the engine (finished or cancelled) at `now`.
    pub(crate) fn depart(&mut self, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        self.last_activity = Some(now);
    }

    /// Cold: never loaded, or nothing in flight and idle past `cold_after` since both the
    /// last activity and the end of the last load.
    pub(crate) fn is_cold(&self, now: Instant) -> bool {
        if self.cold_start.is_zero() {
            return false;
        }
        let Some(loaded_at) = self.loaded_at else {
            return true;
        };
        if self.in_flight > 0 || loaded_at > now {
            return false;
        }
        let idle_since = self.last_activity.map_or(loaded_at, |at| at.max(loaded_at));
        now.saturating_duration_since(idle_since) > self.cold_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn disabled_model_is_always_warm() {
        let mut warmth = Warmth::new(Duration::ZERO, S);
        let now = Instant::now();
        let arrival = warmth.arrive(now);
        assert_eq!(arrival.ready_at, None);
        assert!(!arrival.started_wake);
        warmth.depart(now);
        assert!(!warmth.is_cold(now + 100 * S));
    }

    #[test]
    fn starts_cold_and_arrivals_during_the_load_share_it() {
        let mut warmth = Warmth::new(3 * S, 60 * S);
        let t0 = Instant::now();
        let first = warmth.arrive(t0);
        assert_eq!(first.ready_at, Some(t0 + 3 * S));
        assert!(first.started_wake);
        let second = warmth.arrive(t0 + S);
        assert_eq!(
            second.ready_at,
            Some(t0 + 3 * S),
            "joins the load in progress"
        );
        assert!(!second.started_wake);
        let after = warmth.arrive(t0 + 4 * S);
        assert_eq!(after.ready_at, None, "loaded: no wait");
    }

    #[test]
    fn goes_cold_only_after_idling_past_cold_after() {
        let mut warmth = Warmth::new(3 * S, 60 * S);
        let t0 = Instant::now();
        warmth.arrive(t0);
        warmth.depart(t0 + 5 * S);
        assert!(
            !warmth.is_cold(t0 + 65 * S),
            "exactly 60 s idle is still warm"
        );
        assert!(warmth.is_cold(t0 + 66 * S));
        // A long-running request keeps it warm however long it runs.
        let t1 = t0 + 100 * S;
        assert!(warmth.arrive(t1).started_wake);
        assert!(!warmth.is_cold(t1 + 500 * S));
        warmth.depart(t1 + 500 * S);
        assert!(!warmth.is_cold(t1 + 530 * S));
        assert!(warmth.is_cold(t1 + 561 * S));
    }
}
