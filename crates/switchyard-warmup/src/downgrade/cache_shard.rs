//! One shard of the response cache: its answers by key, their order of last use, and their
//! bytes.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::{CacheKey, CachedAnswer};

#[derive(Default)]
pub(super) struct Shard {
    pub(super) entries: HashMap<CacheKey, (Arc<CachedAnswer>, u64)>,
    order: BTreeMap<u64, CacheKey>,
    pub(super) bytes: usize,
    next_seq: u64,
}

impl Shard {
    pub(super) fn remove(&mut self, key: &CacheKey) -> Option<Arc<CachedAnswer>> {
        let (answer, seq) = self.entries.remove(key)?;
        self.order.remove(&seq);
        self.bytes = self.bytes.saturating_sub(entry_bytes(key, &answer));
        Some(answer)
    }

    pub(super) fn touch(&mut self, key: &CacheKey) {
        self.next_seq += 1;
        let seq = self.next_seq;
        if let Some(entry) = self.entries.get_mut(key) {
            self.order.remove(&entry.1);
            entry.1 = seq;
            self.order.insert(seq, key.clone());
        }
    }

    /// Stores `answer` (`size` bytes with its key) under `key` as the most recently used,
    /// replacing the key's own entry and evicting the least recently used others while the
    /// shard would hold `max_entries` or more than `max_bytes`; answers how many it evicted.
    /// Every successful answer is offered here, so the key is hashed once when nothing
    /// else has to go (a new key, or one replacing its own entry).
    pub(super) fn put(
        &mut self,
        key: CacheKey,
        answer: Arc<CachedAnswer>,
        size: usize,
        (max_entries, max_bytes): (usize, usize),
    ) -> u64 {
        let len = self.entries.len();
        match self.entries.entry(key) {
            Entry::Occupied(mut entry) => {
                let old_seq = entry.get().1;
                let bytes = self
                    .bytes
                    .saturating_sub(entry_bytes(entry.key(), &entry.get().0));
                // Without its own entry the shard holds `len - 1`.
                if len > max_entries || bytes + size > max_bytes {
                    let (key, _) = entry.remove_entry();
                    self.order.remove(&old_seq);
                    self.bytes = bytes;
                    return self.evict_and_insert(key, answer, size, (max_entries, max_bytes));
                }
                self.order.remove(&old_seq);
                self.next_seq += 1;
                let seq = self.next_seq;
                self.order.insert(seq, entry.key().clone());
                entry.insert((answer, seq));
                self.bytes = bytes + size;
                0
            }
            Entry::Vacant(entry) => {
                if len >= max_entries || self.bytes + size > max_bytes {
                    let key = entry.into_key();
                    return self.evict_and_insert(key, answer, size, (max_entries, max_bytes));
                }
                self.next_seq += 1;
                let seq = self.next_seq;
                self.order.insert(seq, entry.key().clone());
                entry.insert((answer, seq));
                self.bytes += size;
                0
            }
        }
    }

    /// [`Shard::put`] for a key not in the shard, evicting first.
    fn evict_and_insert(
        &mut self,
        key: CacheKey,
        answer: Arc<CachedAnswer>,
        size: usize,
        (max_entries, max_bytes): (usize, usize),
    ) -> u64 {
        let mut evicted = 0;
        while self.entries.len() >= max_entries || self.bytes + size > max_bytes {
            let Some(oldest) = self.order.first_key_value().map(|(_, key)| key.clone()) else {
                break;
            };
            self.remove(&oldest);
            evicted += 1;
        }
        self.next_seq += 1;
        let seq = self.next_seq;
        self.order.insert(seq, key.clone());
        self.entries.insert(key, (answer, seq));
        self.bytes += size;
        evicted
    }
}

pub(super) fn entry_bytes(key: &CacheKey, answer: &CachedAnswer) -> usize {
    key.0.len() + answer.body.len() + answer.model.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain definition: the key's own entry removed, then the least recently used
    /// evicted while over the bounds, then the answer inserted.
    fn reference_put(
        shard: &mut Shard,
        key: CacheKey,
        answer: Arc<CachedAnswer>,
        size: usize,
        bounds: (usize, usize),
    ) -> u64 {
        shard.remove(&key);
        shard.evict_and_insert(key, answer, size, bounds)
    }

    fn state(shard: &Shard) -> (Vec<(u64, String, String)>, usize, u64) {
        let order = shard
            .order
            .iter()
            .map(|(seq, key)| {
                let (answer, at) = &shard.entries[key];
                assert_eq!(at, seq, "entries and order agree");
                (*seq, key.0.clone(), answer.body.clone())
            })
            .collect();
        assert_eq!(shard.entries.len(), shard.order.len());
        (order, shard.bytes, shard.next_seq)
    }

    #[test]
    fn put_agrees_with_remove_evict_insert() {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        for bounds in [(3, 10_000), (1000, 60), (4, 45), (1, 1000)] {
            let (mut fast, mut plain) = (Shard::default(), Shard::default());
            let mut evicted = 0;
            for _ in 0..2_000 {
                let key = CacheKey(format!("k{}", next(8)));
                let answer = Arc::new(CachedAnswer {
                    body: "x".repeat(next(30) as usize),
                    model: "m".into(),
                    generated_unix_ms: 0,
                });
                let size = entry_bytes(&key, &answer);
                if next(5) == 0 {
                    fast.touch(&key);
                    plain.touch(&key);
                    continue;
                }
                let by_put = fast.put(key.clone(), Arc::clone(&answer), size, bounds);
                let by_plain = reference_put(&mut plain, key, answer, size, bounds);
                assert_eq!(by_put, by_plain);
                assert_eq!(state(&fast), state(&plain));
                evicted += by_put;
            }
            assert!(evicted > 0, "the bounds {bounds:?} were reached");
        }
    }
}
