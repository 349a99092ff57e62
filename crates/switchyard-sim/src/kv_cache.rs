//! Prefix KV cache: 16-token blocks keyed by a hash chain, evicted LRU.

use std::collections::{BTreeMap, HashMap};

use crate::config::BLOCK_TOKENS;

/// Identity of one cached block: a hash of its parent's key and its own tokens,
/// so equal blocks after different prefixes never collide.
pub(crate) type BlockKey = u64;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// Never occurs in UTF-8, so token boundaries are unambiguous in the hash input.
const TOKEN_SEPARATOR: u8 = 0xff;

/// FNV-1a rather than std's hasher because keys must stay stable across builds
/// and processes (demo output and cross-worker comparisons rely on it).
fn fnv1a(mut hash: u64, bytes: &[u8]) -> u64 {
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(FNV_PRIME);
    }
    hash
}

/// Keys of the prompt's full blocks, in order; a trailing partial block is ignored.
pub(crate) fn block_keys<T: AsRef<str>>(tokens: &[T]) -> Vec<BlockKey> {
    let mut parent = FNV_OFFSET;
    tokens
        .chunks_exact(BLOCK_TOKENS)
        .map(|block| {
            let mut hash = fnv1a(FNV_OFFSET, &parent.to_le_bytes());
            for token in block {
                hash = fnv1a(hash, token.as_ref().as_bytes());
                hash = fnv1a(hash, &[TOKEN_SEPARATOR]);
            }
            parent = hash;
            hash
        })
        .collect()
}

/// LRU set of cached blocks with a fixed capacity.
#[derive(Debug)]
pub(crate) struct PrefixCache {
    capacity: usize,
    last_used: HashMap<BlockKey, u64>,
    by_age: BTreeMap<u64, BlockKey>,
    clock: u64,
}

impl PrefixCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            last_used: HashMap::new(),
            by_age: BTreeMap::new(),
            clock: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.last_used.len()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, key: BlockKey) -> bool {
        self.last_used.contains_key(&key)
    }

    /// Forgets every block (the engine reloaded its model).
    pub(crate) fn clear(&mut self) {
        self.last_used.clear();
        self.by_age.clear();
    }

    /// Number of leading blocks already cached; the walk stops at the first miss.
    /// Matched blocks become most recently used.
    pub(crate) fn lookup(&mut self, keys: &[BlockKey]) -> usize {
        let matched = keys
            .iter()
            .take_while(|key| self.last_used.contains_key(key))
            .count();
        self.touch_chain(&keys[..matched]);
        matched
    }

    /// Caches every block of the chain, evicting least recently used blocks when full.
    pub(crate) fn insert(&mut self, keys: &[BlockKey]) {
        if self.capacity == 0 {
            return;
        }
        self.touch_chain(keys);
    }

    /// Touches deepest-first so that a chain's ancestors end up more recent than
    /// its descendants: eviction then trims chains from the tail, keeping the
    /// shared prefixes that most future lookups walk through.
    fn touch_chain(&mut self, keys: &[BlockKey]) {
        for key in keys.iter().rev() {
            self.touch(*key);
        }
    }

    fn touch(&mut self, key: BlockKey) {
        self.clock += 1;
        if let Some(previous) = self.last_used.insert(key, self.clock) {
            self.by_age.remove(&previous);
        }
        self.by_age.insert(self.clock, key);
        while self.last_used.len() > self.capacity {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.last_used.remove(&oldest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(prefix: &str, count: usize) -> Vec<String> {
        (0..count).map(|i| format!("{prefix}{i}")).collect()
    }

    #[test]
    fn partial_block_is_ignored() {
        assert_eq!(block_keys(&words("w", 15)).len(), 0);
        assert_eq!(block_keys(&words("w", 16)).len(), 1);
        assert_eq!(block_keys(&words("w", 47)).len(), 2);
    }

    #[test]
    fn keys_chain_on_the_parent() {
        let mut a = words("w", 32);
        let mut b = a.clone();
        // Same second block after a different first block must get a different key.
        a[0] = "x".to_owned();
        b[0] = "y".to_owned();
        let (ka, kb) = (block_keys(&a), block_keys(&b));
        assert_ne!(ka[0], kb[0]);
        assert_ne!(ka[1], kb[1]);
        // Deterministic: same tokens, same keys.
        assert_eq!(block_keys(&a), ka);
        // Token boundaries matter: "ab c" differs from "a bc".
        let mut c = words("w", 16);
        let mut d = c.clone();
        c[0] = "ab".to_owned();
        c[1] = "c".to_owned();
        d[0] = "a".to_owned();
        d[1] = "bc".to_owned();
        assert_ne!(block_keys(&c), block_keys(&d));
    }

    #[test]
    fn lookup_walks_until_first_miss() {
        let mut cache = PrefixCache::new(100);
        let shared = words("s", 32);
        let mut first = shared.clone();
        first.extend(words("a", 32));
        let mut second = shared;
        second.extend(words("b", 32));
        let first_keys = block_keys(&first);
        assert_eq!(cache.lookup(&first_keys), 0);
        cache.insert(&first_keys);
        assert_eq!(cache.len(), 4);
        assert_eq!(cache.lookup(&first_keys), 4);
        assert_eq!(cache.lookup(&block_keys(&second)), 2);
    }

    #[test]
    fn capacity_is_never_exceeded() {
        let mut cache = PrefixCache::new(3);
        cache.insert(&block_keys(&words("a", 16 * 5)));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.capacity(), 3);
        // A chain longer than the cache keeps its head, not its tail.
        assert_eq!(cache.lookup(&block_keys(&words("a", 16 * 5))), 3);
        let mut empty = PrefixCache::new(0);
        empty.insert(&block_keys(&words("a", 32)));
        assert_eq!(empty.len(), 0);
    }

    #[test]
    fn least_recently_used_block_is_evicted() {
        let mut cache = PrefixCache::new(2);
        let a = block_keys(&words("a", 16));
        let b = block_keys(&words("b", 16));
        let c = block_keys(&words("c", 16));
        cache.insert(&a);
        cache.insert(&b);
        // Using `a` makes `b` the oldest.
        assert_eq!(cache.lookup(&a), 1);
        cache.insert(&c);
        assert!(cache.contains(a[0]));
        assert!(!cache.contains(b[0]));
        assert!(cache.contains(c[0]));
    }

    #[test]
    fn eviction_trims_chains_from_the_tail() {
        let mut cache = PrefixCache::new(3);
        let chain = block_keys(&words("a", 48));
        cache.insert(&chain);
        cache.insert(&block_keys(&words("z", 16)));
        // The deepest block went first, so the prefix still matches two blocks.
        assert_eq!(cache.lookup(&chain), 2);
    }
}
