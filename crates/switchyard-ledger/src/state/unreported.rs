//! The record of a lease charged in full whose holder has not reported yet: kept by the pool,
//! filled and emptied by the reclaim rules.

use serde::{Deserialize, Serialize};

/// An expired or fenced lease, charged in full, whose holder has not reported yet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unreported {
    /// The period the charge went into (a report from an earlier period gives nothing back:
    /// that spend was reset at rollover).
    pub period_index: u64,
    pub granted_total: u64,
    /// What was charged for the lease in all: its grant plus the debt allowance (or more if
    /// the node had reported more).
    pub charged_total: u64,
    pub used_reported: u64,
}
