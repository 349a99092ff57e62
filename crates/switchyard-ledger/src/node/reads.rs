//! Linearizable reads: what an operator asks the ledger, and the answers. Answered by the
//! leader after `ensure_linearizable`; a follower forwards the question.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use switchyard_core::QuotaScope;

use crate::command::{BudgetSpec, NodeId, SpendTotals, SplitKey};
use crate::state::{
    AffinityRecord, AuditEntry, LedgerCounters, LedgerState, OverrideRecord, SpendRatios,
};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReadQuery {
    Budgets,
    Overrides,
    Audit { after_seq: u64 },
    Splits { from_minute: u64 },
    Ratios,
    Affinity,
    Counters,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LeaseStatus {
    pub node: NodeId,
    pub epoch: u64,
    pub granted_total: u64,
    pub used_reported: u64,
    pub expires_at_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetStatus {
    pub scope: QuotaScope,
    pub spec: BudgetSpec,
    pub spent: u64,
    /// Spent plus what unexpired leases hold: never above the limit.
    pub committed: u64,
    pub leases: Vec<LeaseStatus>,
}

pub type MinuteSplits = BTreeMap<u64, Vec<(SplitKey, SpendTotals)>>;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ReadAnswer {
    Budgets(Vec<BudgetStatus>),
    Overrides(Vec<OverrideRecord>),
    Audit(Vec<AuditEntry>),
    Splits(MinuteSplits),
    Ratios(SpendRatios),
    Affinity(Vec<AffinityRecord>),
    Counters(LedgerCounters),
}

pub fn answer(state: &LedgerState, query: &ReadQuery) -> ReadAnswer {
    match query {
        ReadQuery::Budgets => ReadAnswer::Budgets(
            state
                .pools
                .iter()
                .filter_map(|(id, pool)| match id {
                    crate::command::PoolId::Budget(scope)
                    | crate::command::PoolId::Period(scope, _) => Some(BudgetStatus {
                        scope: scope.clone(),
                        spec: pool.spec.clone(),
                        spent: pool.spent,
                        committed: pool.committed(),
                        leases: pool
                            .leases
                            .iter()
                            .map(|(node, lease)| LeaseStatus {
                                node: *node,
                                epoch: lease.epoch,
                                granted_total: lease.granted_total,
                                used_reported: lease.used_reported,
                                expires_at_ms: lease.expires_at_ms,
                            })
                            .collect(),
                    }),
                    crate::command::PoolId::Override(_) => None,
                })
                .collect(),
        ),
        ReadQuery::Overrides => {
            ReadAnswer::Overrides(state.overrides.records.values().cloned().collect())
        }
        ReadQuery::Audit { after_seq } => ReadAnswer::Audit(
            state
                .overrides
                .audit
                .iter()
                .filter(|e| e.seq > *after_seq)
                .cloned()
                .collect(),
        ),
        ReadQuery::Splits { from_minute } => ReadAnswer::Splits(
            state
                .spend
                .minutes
                .range(from_minute..)
                .map(|(minute, rows)| {
                    (*minute, rows.iter().map(|(k, v)| (k.clone(), *v)).collect())
                })
                .collect(),
        ),
        ReadQuery::Ratios => ReadAnswer::Ratios(state.spend.ratios()),
        ReadQuery::Affinity => {
            ReadAnswer::Affinity(state.affinity.by_prefix.values().cloned().collect())
        }
        ReadQuery::Counters => ReadAnswer::Counters(state.counters),
    }
}
