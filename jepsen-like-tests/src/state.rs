//! The final state read from every node after the run, in the suite's own terms. The cluster
//! adapter maps a replica's admin reads onto these structures; checkers never see the
//! ledger's types, so the ledger can change its wire format without touching the checkers.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use switchyard_core::QuotaScope;

use crate::NodeId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrideStatus {
    Pending,
    Active,
    Expired,
    Revoked,
}

/// A scope's budget as one node's ledger accounts it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetState {
    pub limit: u64,
    /// Tokens charged to the budget (spent, plus held leases that expired unspent).
    pub spent: u64,
    /// Tokens held by unexpired leases.
    pub held: u64,
}

/// One replica's lease on a scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseState {
    pub epoch: u64,
    pub granted_total: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideState {
    pub scope: QuotaScope,
    pub extra_tokens: u64,
    pub duration_ms: u64,
    pub requester: String,
    pub approver: Option<String>,
    pub status: OverrideStatus,
}

/// Identity of an idempotent spend report.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ReportId {
    pub reporter: String,
    pub seq: u64,
}

/// Everything the checkers compare, as read from one node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeState {
    /// The node's applied log index when read (informational; not compared).
    #[serde(default)]
    pub applied_index: Option<u64>,
    #[serde(with = "crate::serde_pairs")]
    pub budgets: BTreeMap<QuotaScope, BudgetState>,
    /// Tokens accounted to each scope from any pool (budget and overrides): the lost-writes
    /// checker requires every acknowledged spend to be covered by it.
    #[serde(with = "crate::serde_pairs")]
    pub accounted_tokens: BTreeMap<QuotaScope, u64>,
    /// Leases per scope and holder.
    #[serde(with = "crate::serde_pairs")]
    pub leases: BTreeMap<QuotaScope, BTreeMap<NodeId, LeaseState>>,
    pub overrides: BTreeMap<u64, OverrideState>,
    /// Prefix key → worker.
    pub affinity: BTreeMap<u64, String>,
    /// Applied spend reports, when the node exposes them (`None`: not checked).
    #[serde(default)]
    pub spend_reports: Option<BTreeSet<ReportId>>,
}

impl NodeState {
    /// The part every replica must agree on (everything but the applied index).
    pub fn replicated_part(&self) -> NodeState {
        NodeState {
            applied_index: None,
            ..self.clone()
        }
    }
}

/// One node's final read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRead {
    pub read_at_ns: u64,
    pub state: Result<NodeState, String>,
}

/// The final reads of every node, taken after the nemesis healed everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalStates {
    /// When the final heal completed (ns since the run started).
    pub healed_at_ns: Option<u64>,
    /// When the clients stopped and the final reads began (ns since the run started).
    #[serde(default)]
    pub quiesced_at_ns: Option<u64>,
    /// When all nodes were first seen to agree (ns since the run started); `None`: never.
    pub converged_at_ns: Option<u64>,
    pub nodes: BTreeMap<NodeId, NodeRead>,
}

impl FinalStates {
    /// Every node read at `at_ns` with the same state.
    pub fn uniform(nodes: &[NodeId], state: &NodeState, at_ns: u64) -> Self {
        Self {
            healed_at_ns: Some(at_ns),
            quiesced_at_ns: Some(at_ns),
            converged_at_ns: Some(at_ns),
            nodes: nodes
                .iter()
                .map(|&node| {
                    (
                        node,
                        NodeRead {
                            read_at_ns: at_ns,
                            state: Ok(state.clone()),
                        },
                    )
                })
                .collect(),
        }
    }

    /// The nodes whose final read succeeded.
    pub fn readable(&self) -> impl Iterator<Item = (NodeId, &NodeState)> {
        self.nodes
            .iter()
            .filter_map(|(node, read)| read.state.as_ref().ok().map(|s| (*node, s)))
    }
}

/// Whether a budget or override on `scope` applies to spend by `caller` for `purpose`.
pub fn scope_covers(scope: &QuotaScope, caller: &str, purpose: switchyard_core::Purpose) -> bool {
    &*scope.caller == caller && scope.purpose.is_none_or(|p| p == purpose)
}

/// Whether two scopes can both apply to some spend (same caller, compatible purposes).
pub fn scopes_overlap(a: &QuotaScope, b: &QuotaScope) -> bool {
    a.caller == b.caller
        && match (a.purpose, b.purpose) {
            (Some(x), Some(y)) => x == y,
            _ => true,
        }
}
