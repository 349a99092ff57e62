//! Memory of recent `x-request-id`s, so a client that resends the same request is recognised
//! as retrying even when it does not say so. Bounded in time (the window) and in size.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::time::{Duration, Instant};

struct Sighting {
    last: Instant,
    count: u32,
}

pub(crate) struct RecentRequestIds {
    window: Duration,
    capacity: usize,
    // Ids are stored as keyed hashes: fixed size whatever the client sends, and one caller's
    // ids never match another's.
    hasher: RandomState,
    seen: HashMap<u64, Sighting>,
    // One entry per sighting, oldest first; entries whose `last` moved on are stale.
    order: VecDeque<(u64, Instant)>,
}

impl RecentRequestIds {
    pub(crate) fn new(window: Duration, capacity: usize) -> Self {
        Self {
            window,
            capacity: capacity.max(1),
            hasher: RandomState::new(),
            seen: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Records a sighting and returns how many earlier sightings fall within the window
    /// (each sighting restarts the window, so slow retry loops stay recognised).
    pub(crate) fn observe(&mut self, caller: &str, request_id: &str, now: Instant) -> u32 {
        self.forget_expired(now);
        let key = self.hasher.hash_one((caller, request_id));
        let earlier = match self.seen.get_mut(&key) {
            Some(sighting) => {
                sighting.last = now;
                sighting.count = sighting.count.saturating_add(1);
                sighting.count - 1
            }
            None => {
                self.seen.insert(
                    key,
                    Sighting {
                        last: now,
                        count: 1,
                    },
                );
                0
            }
        };
        self.order.push_back((key, now));
        while self.seen.len() > self.capacity || self.order.len() > 2 * self.capacity {
            self.pop_oldest();
        }
        earlier
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.seen.len()
    }

    fn forget_expired(&mut self, now: Instant) {
        while let Some((_, at)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.window {
                break;
            }
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        let Some((key, at)) = self.order.pop_front() else {
            return;
        };
        if self.seen.get(&key).is_some_and(|s| s.last == at) {
            self.seen.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_within_the_window_count_and_expire_after_it() {
        let mut ids = RecentRequestIds::new(Duration::from_secs(60), 100);
        let t0 = Instant::now();
        assert_eq!(ids.observe("a", "r1", t0), 0);
        assert_eq!(ids.observe("a", "r1", t0 + Duration::from_secs(30)), 1);
        assert_eq!(
            ids.observe("a", "r1", t0 + Duration::from_secs(80)),
            2,
            "window restarts"
        );
        assert_eq!(
            ids.observe("b", "r1", t0 + Duration::from_secs(80)),
            0,
            "per caller"
        );
        assert_eq!(
            ids.observe("a", "r1", t0 + Duration::from_secs(141)),
            0,
            "expired"
        );
    }

    #[test]
    fn memory_is_bounded_by_capacity() {
        let mut ids = RecentRequestIds::new(Duration::from_secs(60), 10);
        let t0 = Instant::now();
        for i in 0..1_000 {
            ids.observe("a", &format!("r{i}"), t0);
        }
        assert_eq!(ids.len(), 10);
        assert_eq!(ids.observe("a", "r999", t0), 1, "newest kept");
        assert_eq!(ids.observe("a", "r0", t0), 0, "oldest forgotten");
        for _ in 0..1_000 {
            ids.observe("a", "same", t0);
        }
        assert!(ids.order.len() <= 20);
    }
}
