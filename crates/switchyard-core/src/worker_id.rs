use serde::{Deserialize, Serialize};
use std::fmt;

/// A worker's numeric identity inside one gateway process.
///
/// Ids are handed out by the worker registry and never reused while the process lives,
/// so a stale id held by a routing structure can never alias a newer worker.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct WorkerId(pub u32);

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "w{}", self.0)
    }
}
