//! The ring's section of the routing config: shared by `consistent_hash` and by
//! `cache_aware`'s hash placement, so it sits with the ring both build on.

use crate::error::{RouterError, invalid};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ConsistentHashConfig {
    /// Virtual nodes per worker (256; fewer moves keys unevenly on changes).
    pub vnodes_per_worker: u32,
    /// Bounded load: a worker above this × the mean in-flight (≥ 1.0) is skipped.
    pub load_factor: f64,
}

impl Default for ConsistentHashConfig {
    fn default() -> Self {
        Self {
            vnodes_per_worker: 256,
            load_factor: 1.25,
        }
    }
}

impl ConsistentHashConfig {
    pub fn validate(&self) -> Result<(), RouterError> {
        if !(1..=4096).contains(&self.vnodes_per_worker) {
            return Err(invalid(
                "consistent_hash.vnodes_per_worker",
                "must be within 1..=4096",
                self.vnodes_per_worker,
            ));
        }
        if !(self.load_factor.is_finite() && self.load_factor >= 1.0) {
            return Err(invalid(
                "consistent_hash.load_factor",
                "must be a finite number >= 1.0",
                self.load_factor,
            ));
        }
        Ok(())
    }
}
