//! `GET /admin/ledger/local` (a replica's locally applied ledger state) mapped onto the
//! suite's [`NodeState`].
//!
//! Accounting per budget scope is the budget pool's `committed` (spent + what unexpired leases
//! hold, debt allowance included) plus every override pool on the same caller. An approved
//! override whose pool is gone (closed, every lease settled) is counted at its full grant: the
//! ledger no longer says how much of it was drawn, so the lost-writes check is weaker for
//! override spend, never falsely alarmed.

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use switchyard_core::{Purpose, QuotaScope};

use super::credentials::{CHAOS_REPORTER, CHAOS_REPORTER_BASE};
use crate::state::{
    BudgetState, LeaseState, NodeState, OverrideState, OverrideStatus, ReportId, scopes_overlap,
};

#[derive(Clone, Debug, Deserialize)]
pub struct ScopeJson {
    pub caller: String,
    #[serde(default)]
    pub purpose: Option<Purpose>,
}

impl ScopeJson {
    pub fn scope(&self) -> QuotaScope {
        QuotaScope {
            caller: Arc::from(self.caller.as_str()),
            purpose: self.purpose,
        }
    }
}

#[derive(Clone, Debug, Deserialize)]
struct LeaseJson {
    node: u64,
    epoch: u64,
    granted_total: u64,
}

#[derive(Clone, Debug, Deserialize)]
struct PoolJson {
    kind: String,
    scope: Option<ScopeJson>,
    override_id: Option<u64>,
    limit: u64,
    spent: u64,
    committed: u64,
    leases: Vec<LeaseJson>,
}

#[derive(Clone, Debug, Deserialize)]
struct OverrideJson {
    id: u64,
    scope: ScopeJson,
    extra_tokens: u64,
    duration_ms: u64,
    requester: String,
    approver: Option<String>,
    status: String,
}

#[derive(Clone, Debug, Deserialize)]
struct AffinityJson {
    prefix_key: u64,
    worker: String,
}

#[derive(Clone, Debug, Deserialize)]
struct BatchJson {
    node: u64,
    seq: u64,
}

/// The body of `GET /admin/ledger/local`.
#[derive(Clone, Debug, Deserialize)]
pub struct LocalState {
    pub node_id: u64,
    pub role: String,
    pub leader: Option<u64>,
    pub applied_index: u64,
    pools: Vec<PoolJson>,
    overrides: Vec<OverrideJson>,
    affinity: Vec<AffinityJson>,
    spend_batches: Vec<BatchJson>,
}

pub fn parse_status(status: &str) -> Option<OverrideStatus> {
    Some(match status.to_ascii_lowercase().as_str() {
        "pending" => OverrideStatus::Pending,
        "active" => OverrideStatus::Active,
        "expired" => OverrideStatus::Expired,
        "revoked" => OverrideStatus::Revoked,
        _ => return None,
    })
}

impl LocalState {
    pub fn to_node_state(&self) -> Result<NodeState, String> {
        let mut state = NodeState {
            applied_index: Some(self.applied_index),
            spend_reports: Some(BTreeSet::new()),
            ..NodeState::default()
        };
        let mut override_committed: BTreeMap<u64, u64> = BTreeMap::new();
        for pool in &self.pools {
            match (pool.kind.as_str(), &pool.scope, pool.override_id) {
                ("budget", Some(scope), _) => {
                    let scope = scope.scope();
                    state.budgets.insert(
                        scope.clone(),
                        BudgetState {
                            limit: pool.limit,
                            spent: pool.spent,
                            held: pool.committed.saturating_sub(pool.spent),
                        },
                    );
                    state.accounted_tokens.insert(scope.clone(), pool.committed);
                    let leases = pool
                        .leases
                        .iter()
                        .map(|l| {
                            let holder = u32::try_from(l.node).unwrap_or(u32::MAX);
                            let lease = LeaseState {
                                epoch: l.epoch,
                                granted_total: l.granted_total,
                            };
                            (holder, lease)
                        })
                        .collect();
                    state.leases.insert(scope, leases);
                }
                ("override", _, Some(id)) => {
                    override_committed.insert(id, pool.committed);
                }
                _ => return Err(format!("unexpected pool {pool:?}")),
            }
        }
        for record in &self.overrides {
            let status = parse_status(&record.status)
                .ok_or_else(|| format!("unknown override status `{}`", record.status))?;
            let scope = record.scope.scope();
            let drawn = match override_committed.get(&record.id) {
                Some(committed) => *committed,
                None if record.approver.is_some() => record.extra_tokens,
                None => 0,
            };
            for (budget_scope, accounted) in state.accounted_tokens.iter_mut() {
                if scopes_overlap(budget_scope, &scope) {
                    *accounted = accounted.saturating_add(drawn);
                }
            }
            state.overrides.insert(
                record.id,
                OverrideState {
                    scope,
                    extra_tokens: record.extra_tokens,
                    duration_ms: record.duration_ms,
                    requester: record.requester.clone(),
                    approver: record.approver.clone(),
                    status,
                },
            );
        }
        state.affinity = self
            .affinity
            .iter()
            .map(|a| (a.prefix_key, a.worker.clone()))
            .collect();
        state.spend_reports = Some(
            self.spend_batches
                .iter()
                .filter(|b| b.node >= CHAOS_REPORTER_BASE && b.seq >= 1)
                .map(|b| ReportId {
                    reporter: CHAOS_REPORTER.to_owned(),
                    seq: b.node - CHAOS_REPORTER_BASE,
                })
                .collect(),
        );
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = r#"{
      "node_id": 2, "role": "follower", "leader": 1, "term": 3, "applied_index": 40, "now_ms": 5,
      "pools": [
        {"kind": "budget", "scope": {"caller": "alice", "purpose": null}, "override_id": null,
         "limit": 1000, "spent": 300, "committed": 450, "closed": false,
         "leases": [{"node": 1, "epoch": 4, "granted_total": 120, "used_reported": 0, "expires_at_ms": 9}]},
        {"kind": "override", "scope": null, "override_id": 7, "limit": 500, "spent": 40,
         "committed": 90, "closed": false, "leases": []}
      ],
      "overrides": [
        {"id": 7, "scope": {"caller": "alice", "purpose": "business"}, "extra_tokens": 500,
         "duration_ms": 3000, "requester": "ops-ann", "approver": "ops-ben", "status": "active", "until_ms": 1},
        {"id": 8, "scope": {"caller": "alice", "purpose": null}, "extra_tokens": 200,
         "duration_ms": 3000, "requester": "ops-ann", "approver": "ops-cy", "status": "expired", "until_ms": 1},
        {"id": 9, "scope": {"caller": "bob", "purpose": null}, "extra_tokens": 900,
         "duration_ms": 3000, "requester": "ops-ann", "approver": null, "status": "pending", "until_ms": 1}
      ],
      "affinity": [{"prefix_key": 3, "worker": "sim-2", "log_index": 12}],
      "spend_batches": [{"node": 1, "boot_id": 77, "seq": 9},
                        {"node": 1099511627781, "boot_id": 1, "seq": 1}]
    }"#;

    #[test]
    fn maps_pools_overrides_affinity_and_chaos_reports() {
        let local: LocalState = serde_json::from_str(BODY).unwrap();
        assert_eq!((local.node_id, local.leader), (2, Some(1)));
        let state = local.to_node_state().unwrap();
        let alice = QuotaScope::caller("alice");
        assert_eq!(
            state.budgets[&alice],
            BudgetState {
                limit: 1000,
                spent: 300,
                held: 150
            }
        );
        assert_eq!(
            state.accounted_tokens[&alice],
            450 + 90 + 200,
            "budget, the live override pool, and the gone pool of an approved override"
        );
        assert_eq!(state.leases[&alice][&1].granted_total, 120);
        assert_eq!(state.overrides[&9].status, OverrideStatus::Pending);
        assert_eq!(state.affinity[&3], "sim-2");
        let reports = state.spend_reports.unwrap();
        assert_eq!(reports.len(), 1, "only the suite's own reporters");
        assert!(reports.contains(&ReportId {
            reporter: CHAOS_REPORTER.into(),
            seq: 5
        }));
    }
}
