//! Node-side leases. [`LeaseTable`] is what the hot path reads (a published set of
//! [`LocalLease`]s, one per pool); the keeper task (`keeper`) acquires, renews and releases
//! them through the ledger in the background.

pub(crate) mod keeper;
mod local;
mod shares;

pub use local::{LeaseMiss, LeaseSnapshot, LocalLease};
pub use shares::{BURST, ShareLimiter, ShareMiss, UNLIMITED_SHARE};

use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use switchyard_core::{Clock, FleetLimit, QuotaError, QuotaScope, SpendTags};
use tokio::sync::Notify;

use crate::command::PoolId;
use crate::view::{ActiveOverride, LedgerView};

/// Reason given when the lease ran out and the ledger cannot be reached (SPEC §5).
pub const UNREACHABLE_REASON: &str = "quota_ledger_unreachable";
/// Reason given while the first lease of a budget (or a bigger one) is being fetched.
pub const PENDING_REASON: &str = "quota_lease_pending";

#[derive(Default)]
pub(crate) struct LeaseSet {
    pub budgets: HashMap<QuotaScope, Arc<LocalLease>>,
    pub overrides: Vec<(ActiveOverride, Arc<LocalLease>)>,
}

impl LeaseSet {
    pub fn all(&self) -> impl Iterator<Item = &Arc<LocalLease>> {
        self.budgets
            .values()
            .chain(self.overrides.iter().map(|(_, lease)| lease))
    }
}

/// Which way a reservation went (each is a metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Unbudgeted,
    Lease,
    Override,
    Exhausted,
    Unreachable,
    Pending,
    /// This node's share of the fleet-wide token rate is used up for now.
    RateLimited,
    /// This node's share of the fleet-wide concurrency is in flight.
    ConcurrencyLimited,
}

/// A refused reservation: the error for admission and the branch for metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Refused {
    pub decision: Decision,
    pub error: QuotaError,
}

pub struct LeaseTable {
    clock: Arc<dyn Clock>,
    set: ArcSwap<LeaseSet>,
    view: Arc<ArcSwap<LedgerView>>,
    reachable: AtomicBool,
    kick: Notify,
}

impl LeaseTable {
    pub(crate) fn new(clock: Arc<dyn Clock>, view: Arc<ArcSwap<LedgerView>>) -> Self {
        Self {
            clock,
            set: ArcSwap::from_pointee(LeaseSet::default()),
            view,
            reachable: AtomicBool::new(true),
            kick: Notify::new(),
        }
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    pub(crate) fn set(&self) -> arc_swap::Guard<Arc<LeaseSet>> {
        self.set.load()
    }

    pub(crate) fn view(&self) -> arc_swap::Guard<Arc<LedgerView>> {
        self.view.load()
    }

    pub(crate) fn kicked(&self) -> &Notify {
        &self.kick
    }

    pub(crate) fn set_reachable(&self, reachable: bool) {
        self.reachable.store(reachable, Ordering::Relaxed);
    }

    pub fn ledger_reachable(&self) -> bool {
        self.reachable.load(Ordering::Relaxed)
    }

    /// Matches the local leases to the pools in the applied view: a lease per budget and per
    /// active override, kept across calls so counters survive; gone pools are dropped.
    pub(crate) fn sync_with_view(&self) -> bool {
        let view = self.view.load();
        let current = self.set.load();
        let same_budgets = current.budgets.len()
            == view
                .pools
                .keys()
                .filter(|p| matches!(p, PoolId::Budget(_)))
                .count()
            && current
                .budgets
                .keys()
                .all(|scope| view.budget(scope).is_some());
        let same_overrides = current.overrides.len() == view.active_overrides.len()
            && current
                .overrides
                .iter()
                .zip(&view.active_overrides)
                .all(|((a, _), b)| a == b);
        if same_budgets && same_overrides {
            return false;
        }
        let mut next = LeaseSet::default();
        for pool in view.pools.keys() {
            if let PoolId::Budget(scope) = pool {
                let lease =
                    current.budgets.get(scope).cloned().unwrap_or_else(|| {
                        Arc::new(LocalLease::new(pool.clone(), self.clock.now()))
                    });
                next.budgets.insert(scope.clone(), lease);
            }
        }
        for active in &view.active_overrides {
            let pool = PoolId::Override(active.id);
            let lease = current
                .overrides
                .iter()
                .find(|(o, _)| o.id == active.id)
                .map(|(_, lease)| lease.clone())
                .unwrap_or_else(|| Arc::new(LocalLease::new(pool, self.clock.now())));
            next.overrides.push((active.clone(), lease));
        }
        self.set.store(Arc::new(next));
        true
    }

    /// The hot path: a slot within this node's rate and concurrency shares, then tokens from
    /// the local lease, then from a covering override.
    pub(crate) fn reserve(&self, tags: &SpendTags, tokens: u64) -> Result<Decision, Refused> {
        let set = self.set.load();
        let now = self.clock.now();
        let budget = set.budgets.get(&tags.scope);
        if let Some(lease) = budget
            && let Err(miss) = lease.try_acquire_shares(tokens, now)
        {
            lease.note_refused_demand(tokens);
            return Err(share_refusal(tags, miss));
        }
        let miss = match budget {
            Some(lease) => match lease.try_reserve(tokens, now) {
                Ok(()) => return Ok(Decision::Lease),
                Err(miss) => miss,
            },
            None => {
                let view = self.view.load();
                if view.budget(&tags.scope).is_none() {
                    return Ok(Decision::Unbudgeted);
                }
                self.kick.notify_one();
                LeaseMiss::NoLease
            }
        };
        for (active, lease) in &set.overrides {
            if active.covers(&tags.scope.caller, tags.purpose)
                && lease.try_reserve(tokens, now).is_ok()
            {
                return Ok(Decision::Override);
            }
        }
        if let Some(lease) = budget {
            lease.release_shares(tokens, 0);
        }
        Err(self.refusal(tags, miss))
    }

    fn refusal(&self, tags: &SpendTags, miss: LeaseMiss) -> Refused {
        let view = self.view.load();
        let reachable = self.ledger_reachable();
        let unavailable = |decision, reason: &str| Refused {
            decision,
            error: QuotaError::Unavailable {
                reason: reason.to_owned(),
            },
        };
        if !reachable && miss != LeaseMiss::Short {
            return unavailable(Decision::Unreachable, UNREACHABLE_REASON);
        }
        if let Some(pool) = view.budget(&tags.scope).filter(|p| p.committed >= p.limit) {
            return Refused {
                decision: Decision::Exhausted,
                error: QuotaError::Exhausted {
                    scope: tags.scope.clone(),
                    limit: pool.limit,
                    used: pool.committed,
                },
            };
        }
        self.kick.notify_one();
        if reachable {
            unavailable(Decision::Pending, PENDING_REASON)
        } else {
            unavailable(Decision::Unreachable, UNREACHABLE_REASON)
        }
    }

    /// Settles against the lease the reservation came from; answers tokens beyond the debt
    /// allowance (0 when unbudgeted).
    pub(crate) fn settle(
        &self,
        tags: &SpendTags,
        under_override: bool,
        estimate: u64,
        actual: u64,
    ) -> u64 {
        let set = self.set.load();
        // The reservation does not say whether it took a share slot; only one reserved while
        // the scope had no local lease yet did not, and releasing it is harmless (saturating).
        if let Some(budget) = set.budgets.get(&tags.scope) {
            budget.release_shares(estimate, actual);
        }
        let lease = if under_override {
            set.overrides
                .iter()
                .filter(|(o, _)| o.covers(&tags.scope.caller, tags.purpose))
                .map(|(_, lease)| lease)
                .find(|lease| lease.snapshot().inflight >= estimate)
        } else {
            set.budgets.get(&tags.scope)
        };
        lease.map_or(0, |lease| lease.settle(estimate, actual))
    }

    /// `(spent + this node's unreported use) / limit`; other nodes' use since their last
    /// renewal shows up when they renew (at most half a TTL later).
    pub(crate) fn water_level(&self, scope: &QuotaScope) -> Option<f64> {
        let view = self.view.load();
        let pool = view.budget(scope)?;
        let local = self
            .set
            .load()
            .budgets
            .get(scope)
            .map(|lease| {
                let s = lease.snapshot();
                s.used_total.saturating_sub(s.used_at_renewal)
            })
            .unwrap_or(0);
        let used = pool.spent.saturating_add(local);
        Some(used as f64 / pool.limit.max(1) as f64)
    }

    /// This node's rate and concurrency shares of a budget: `(tokens/s, requests, in flight)`.
    pub fn share_snapshot(&self, scope: &QuotaScope) -> Option<(u64, u64, u64)> {
        self.set.load().budgets.get(scope).map(|lease| {
            let shares = lease.shares();
            (
                shares.rate_per_s(),
                shares.concurrency(),
                shares.in_flight(),
            )
        })
    }

    /// This node's lease on a budget, for tests and status pages.
    pub fn lease_snapshot(&self, scope: &QuotaScope) -> Option<LeaseSnapshot> {
        self.set.load().budgets.get(scope).map(|l| l.snapshot())
    }
}

/// Rate and concurrency refusals are the caller's own quota (429 with `Retry-After`); the
/// share named is this node's part of the fleet-wide limit.
fn share_refusal(tags: &SpendTags, miss: ShareMiss) -> Refused {
    let (decision, limit, share) = match miss {
        ShareMiss::Rate { rate_per_s, .. } => (Decision::RateLimited, FleetLimit::Rate, rate_per_s),
        ShareMiss::Concurrency { limit } => {
            (Decision::ConcurrencyLimited, FleetLimit::Concurrency, limit)
        }
    };
    Refused {
        decision,
        error: QuotaError::FleetShare {
            scope: tags.scope.clone(),
            limit,
            share,
        },
    }
}
