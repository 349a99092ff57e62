//! Space-saving top-k (Metwally, Agrawal, El Abbadi): at most `capacity` counters, and every
//! key seen more than total / capacity times is guaranteed to hold one.

use crate::hash::PrehashedKey;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Counter {
    key: u64,
    count: u64,
    /// Upper bound of how much of `count` belongs to keys this counter replaced.
    error: u64,
}

#[derive(Debug)]
pub(crate) struct SpaceSaving {
    capacity: usize,
    counters: Vec<Counter>,
    index: HashMap<u64, usize, BuildHasherDefault<PrehashedKey>>,
    total: u64,
}

impl SpaceSaving {
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            capacity,
            counters: Vec::with_capacity(capacity),
            index: HashMap::with_capacity_and_hasher(capacity, BuildHasherDefault::default()),
            total: 0,
        }
    }

    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn record(&mut self, key: u64) {
        self.total += 1;
        if let Some(&slot) = self.index.get(&key) {
            if let Some(counter) = self.counters.get_mut(slot) {
                counter.count += 1;
            }
            return;
        }
        if self.counters.len() < self.capacity {
            self.index.insert(key, self.counters.len());
            self.counters.push(Counter {
                key,
                count: 1,
                error: 0,
            });
            return;
        }
        // A linear scan for the minimum: k is small (tens), and misses on a full sketch are
        // the only path that needs it.
        let Some((slot, smallest)) = self
            .counters
            .iter()
            .enumerate()
            .min_by_key(|(_, c)| c.count)
            .map(|(slot, c)| (slot, *c))
        else {
            return;
        };
        self.index.remove(&smallest.key);
        self.index.insert(key, slot);
        self.counters[slot] = Counter {
            key,
            count: smallest.count + 1,
            error: smallest.count,
        };
    }

    /// Occurrences of `key` that are certainly its own (0 if untracked).
    pub(crate) fn guaranteed(&self, key: u64) -> u64 {
        self.index
            .get(&key)
            .and_then(|&slot| self.counters.get(slot))
            .map_or(0, |c| c.count - c.error)
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = u64> + '_ {
        self.counters.iter().map(|c| c.key)
    }

    pub(crate) fn clear(&mut self) {
        self.counters.clear();
        self.index.clear();
        self.total = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heavy_hitters_survive_a_stream_of_distinct_keys() {
        let mut sketch = SpaceSaving::new(8);
        for i in 0..10_000u64 {
            // Key 1 is 20 % of traffic, key 2 is 10 %, the rest are all different.
            let key = match i % 10 {
                0 | 5 => 1,
                3 => 2,
                _ => 1_000 + i,
            };
            sketch.record(key);
        }
        assert_eq!(sketch.total(), 10_000);
        let (one, two) = (sketch.guaranteed(1), sketch.guaranteed(2));
        // The guaranteed count never overstates and loses at most total / capacity.
        assert!((2_000 - 10_000 / 8..=2_000).contains(&one), "{one}");
        assert!(two <= 1_000 && two > 0, "{two}");
        assert_eq!(sketch.guaranteed(1_007), 0);
        assert!(sketch.keys().count() <= 8);
        sketch.clear();
        assert_eq!((sketch.total(), sketch.guaranteed(1)), (0, 0));
    }
}
