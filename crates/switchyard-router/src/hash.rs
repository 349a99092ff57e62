//! The one 64-bit hash every placement decision uses.
//!
//! Gateway replicas must agree on where a key goes without talking, and a rolling upgrade
//! must not reshuffle the fleet, so the hash has to be identical across processes, machines
//! and releases: XXH3-64, whose output is frozen by its specification (unlike std's
//! per-process-keyed SipHash). The golden values in the tests pin it.

use std::hash::Hasher;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// Stable hash of `bytes`.
pub fn stable_hash(bytes: &[u8]) -> u64 {
    xxh3_64(bytes)
}

/// Stable hash of `bytes` under `seed`, for deriving several independent positions (virtual
/// nodes, hotspot slices) from one input.
pub fn stable_hash_seeded(bytes: &[u8], seed: u64) -> u64 {
    xxh3_64_with_seed(bytes, seed)
}

/// Keys are already stable 64-bit hashes; hashing them again would only cost time.
#[derive(Default)]
pub(crate) struct PrehashedKey(u64);

impl Hasher for PrehashedKey {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(byte);
        }
    }

    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_xxh3_reference_values() {
        // XXH3_64bits("") from the reference implementation's test vectors.
        assert_eq!(stable_hash(b""), 0x2D06_8005_38D3_94C2);
        // Pinned from this implementation so any change to ring placement is caught: a
        // different value here means every replica and release would disagree.
        assert_eq!(stable_hash(b"worker-a"), PINNED_WORKER_A);
        assert_eq!(stable_hash_seeded(b"worker-a", 7), PINNED_WORKER_A_SEED_7);
    }

    const PINNED_WORKER_A: u64 = 0xA94B_5AF9_8D9A_C443;
    const PINNED_WORKER_A_SEED_7: u64 = 0x57AE_4B43_5D53_755F;

    #[test]
    fn seeds_give_independent_values() {
        assert_ne!(stable_hash_seeded(b"k", 1), stable_hash_seeded(b"k", 2));
        assert_eq!(stable_hash_seeded(b"k", 0), stable_hash(b"k"));
    }
}
