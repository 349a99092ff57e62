//! Prefix-affinity migrations: which worker a prefix moved to, and why. Bounded: the oldest
//! record (by log index) is dropped first, the same way on every replica.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const MAX_AFFINITY_RECORDS: usize = 65_536;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityRecord {
    pub prefix_key: u64,
    pub prefix: String,
    pub worker: String,
    pub displaced: Vec<String>,
    pub reason: String,
    pub at_ms: u64,
    pub log_index: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AffinityTable {
    pub by_prefix: BTreeMap<u64, AffinityRecord>,
    by_index: BTreeMap<u64, u64>,
}

impl AffinityTable {
    pub fn record(&mut self, record: AffinityRecord) {
        if let Some(old) = self.by_prefix.remove(&record.prefix_key) {
            self.by_index.remove(&old.log_index);
        }
        self.by_index.insert(record.log_index, record.prefix_key);
        self.by_prefix.insert(record.prefix_key, record);
        while self.by_prefix.len() > MAX_AFFINITY_RECORDS {
            let Some((_, prefix)) = self.by_index.pop_first() else {
                break;
            };
            self.by_prefix.remove(&prefix);
        }
    }
}
