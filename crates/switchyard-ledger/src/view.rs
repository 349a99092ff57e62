//! The small published summary of the applied state that the hot path, the lease keeper and
//! `water_level` read (an `ArcSwap`, rebuilt after each applied batch).

use std::collections::HashMap;
use switchyard_core::{Purpose, QuotaScope};

use crate::command::PoolId;
use crate::state::{LedgerCounters, LedgerState};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolSummary {
    pub limit: u64,
    pub spent: u64,
    /// Spent plus everything held by unexpired leases.
    pub committed: u64,
    pub closed: bool,
    pub leases: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActiveOverride {
    pub id: u64,
    pub scope: QuotaScope,
    pub extra_tokens: u64,
    pub until_ms: u64,
}

impl ActiveOverride {
    /// An override on `caller` covers every purpose; on `caller/purpose` only that one.
    pub fn covers(&self, caller: &str, purpose: Purpose) -> bool {
        &*self.scope.caller == caller && self.scope.purpose.is_none_or(|p| p == purpose)
    }
}

#[derive(Clone, Debug, Default)]
pub struct LedgerView {
    pub applied_index: u64,
    pub now_ms: u64,
    pub pools: HashMap<PoolId, PoolSummary>,
    pub active_overrides: Vec<ActiveOverride>,
    /// The replicated counters (lease grants, denials, expiries), for metrics.
    pub counters: LedgerCounters,
}

impl LedgerView {
    pub fn from_state(state: &LedgerState) -> Self {
        let pools = state
            .pools
            .iter()
            .map(|(id, pool)| {
                (
                    id.clone(),
                    PoolSummary {
                        limit: pool.spec.limit_tokens,
                        spent: pool.spent,
                        committed: pool.committed(),
                        closed: pool.closed,
                        leases: pool.leases.len(),
                    },
                )
            })
            .collect();
        let active_overrides = state
            .overrides
            .active()
            .map(|r| ActiveOverride {
                id: r.id,
                scope: r.scope.clone(),
                extra_tokens: r.extra_tokens,
                until_ms: r.until_ms,
            })
            .collect();
        Self {
            applied_index: state.last_index,
            now_ms: state.now_ms,
            pools,
            active_overrides,
            counters: state.counters,
        }
    }

    pub fn budget(&self, scope: &QuotaScope) -> Option<&PoolSummary> {
        self.pools.get(&PoolId::Budget(scope.clone()))
    }

    pub fn pool(&self, id: &PoolId) -> Option<&PoolSummary> {
        self.pools.get(id)
    }
}
