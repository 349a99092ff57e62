//! The deliberate bugs the in-memory cluster can switch on ([`SimBugs`]). Both the cluster
//! and its ledger consult them, so they live apart from the module root.

use serde::{Deserialize, Serialize};

/// Deliberate bugs, each breaking one guarantee.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimBugs {
    /// Admits spend past the budget (budget safety).
    pub over_admit: bool,
    /// A killed node takes the newest override proposal with it (lost writes).
    pub lose_writes_on_kill: bool,
    /// Lets a requester approve its own override (override rules, linearizability).
    pub self_approval: bool,
    /// Lets an active or expired override be approved again (override rules).
    pub renewal: bool,
    /// Override listings after the first are served from a stale snapshot (linearizability).
    pub stale_listing: bool,
    /// The highest node reports a different final state (convergence).
    pub diverge: bool,
    /// Every 25th request fails with a bare 500 (availability).
    pub unclear_errors: bool,
    /// Every 30th request on a healthy node never answers (availability: hangs).
    pub hang: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown simulated bug `{0}` (expected one of {names})", names = SimBugs::NAMES.join(", "))]
pub struct UnknownBug(pub String);

impl SimBugs {
    pub const NAMES: [&'static str; 8] = [
        "over-admit",
        "lose-writes",
        "self-approval",
        "renewal",
        "stale-listing",
        "diverge",
        "unclear-errors",
        "hang",
    ];

    /// Parses a comma-separated list of [`SimBugs::NAMES`].
    pub fn parse(list: &str) -> Result<Self, UnknownBug> {
        let mut bugs = Self::default();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let flag = match name {
                "over-admit" => &mut bugs.over_admit,
                "lose-writes" => &mut bugs.lose_writes_on_kill,
                "self-approval" => &mut bugs.self_approval,
                "renewal" => &mut bugs.renewal,
                "stale-listing" => &mut bugs.stale_listing,
                "diverge" => &mut bugs.diverge,
                "unclear-errors" => &mut bugs.unclear_errors,
                "hang" => &mut bugs.hang,
                other => return Err(UnknownBug(other.to_owned())),
            };
            *flag = true;
        }
        Ok(bugs)
    }
}
