//! The set of local leases the hot path reads: one per budget, one per extra period limit of
//! a budgeted scope, one per active override. Rebuilt from the applied view when pools come
//! and go; leases that stay keep their counters.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;
use switchyard_core::QuotaScope;

use super::local::LocalLease;
use crate::command::PoolId;
use crate::view::{ActiveOverride, LedgerView};

#[derive(Default)]
pub(crate) struct LeaseSet {
    pub budgets: HashMap<QuotaScope, Arc<LocalLease>>,
    /// Further period limits of a budgeted scope (e.g. its month next to its day budget):
    /// a request spends from the budget's lease and from every one of these.
    pub periods: HashMap<QuotaScope, Vec<Arc<LocalLease>>>,
    pub overrides: Vec<(ActiveOverride, Arc<LocalLease>)>,
}

impl LeaseSet {
    pub fn all(&self) -> impl Iterator<Item = &Arc<LocalLease>> {
        self.budgets
            .values()
            .chain(self.periods.values().flatten())
            .chain(self.overrides.iter().map(|(_, lease)| lease))
    }

    fn find(&self, pool: &PoolId) -> Option<&Arc<LocalLease>> {
        match pool {
            PoolId::Budget(scope) => self.budgets.get(scope),
            PoolId::Period(scope, _) => self
                .periods
                .get(scope)
                .and_then(|leases| leases.iter().find(|l| &l.pool == pool)),
            PoolId::Override(id) => self
                .overrides
                .iter()
                .find(|(o, _)| o.id == *id)
                .map(|(_, lease)| lease),
        }
    }

    /// Whether this set has exactly the view's pools (overrides in the view's order).
    fn matches(&self, view: &LedgerView) -> bool {
        let local_pools = self.budgets.len() + self.periods.values().map(Vec::len).sum::<usize>();
        let view_pools = view
            .pools
            .keys()
            .filter(|p| !matches!(p, PoolId::Override(_)))
            .count();
        let same_pools = local_pools == view_pools
            && self
                .all()
                .filter(|l| !matches!(l.pool, PoolId::Override(_)))
                .all(|l| view.pool(&l.pool).is_some());
        let same_overrides = self.overrides.len() == view.active_overrides.len()
            && self
                .overrides
                .iter()
                .zip(&view.active_overrides)
                .all(|((a, _), b)| a == b);
        same_pools && same_overrides
    }

    /// The set for `view`, reusing the leases of `self` that are still there; `None` when
    /// nothing changed.
    pub fn synced(&self, view: &LedgerView, now: Instant) -> Option<LeaseSet> {
        if self.matches(view) {
            return None;
        }
        let lease_for = |pool: &PoolId| {
            self.find(pool)
                .cloned()
                .unwrap_or_else(|| Arc::new(LocalLease::new(pool.clone(), now)))
        };
        let mut next = LeaseSet::default();
        for pool in view.pools.keys() {
            match pool {
                PoolId::Budget(scope) => {
                    next.budgets.insert(scope.clone(), lease_for(pool));
                }
                PoolId::Period(scope, _) => {
                    next.periods
                        .entry(scope.clone())
                        .or_default()
                        .push(lease_for(pool));
                }
                PoolId::Override(_) => {}
            }
        }
        for active in &view.active_overrides {
            next.overrides
                .push((active.clone(), lease_for(&PoolId::Override(active.id))));
        }
        Some(next)
    }
}
