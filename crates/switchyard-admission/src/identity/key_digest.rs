//! API keys are kept as SHA-256 digests: a memory dump or a debug print of the identity table
//! shows no key, and digests are compared without an early exit.

use sha2::{Digest, Sha256};
use std::fmt;

#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) struct KeyDigest([u8; 32]);

impl KeyDigest {
    pub(crate) fn of(key: &str) -> Self {
        Self(Sha256::digest(key.as_bytes()).into())
    }

    /// Equality that reads every byte whatever the first difference.
    pub(crate) fn matches(&self, other: &KeyDigest) -> bool {
        self.0
            .iter()
            .zip(other.0.iter())
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl fmt::Debug for KeyDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("KeyDigest(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_match_only_the_same_key() {
        let a = KeyDigest::of("sk-team-a-0123456789");
        assert!(a.matches(&KeyDigest::of("sk-team-a-0123456789")));
        assert!(!a.matches(&KeyDigest::of("sk-team-a-0123456788")));
        assert!(!format!("{a:?}").contains("sk-team"));
    }
}
