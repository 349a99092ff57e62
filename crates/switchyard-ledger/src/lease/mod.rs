//! Node-side leases. [`LeaseTable`] is what the hot path reads (a published set of
//! [`LocalLease`]s, one per pool); the keeper task (`node::lease_keeper`) acquires, renews
//! and releases them through the ledger in the background.

mod latency;
mod local;
mod set;
mod shares;

pub use latency::LatencyTracker;
pub use local::{LeaseMiss, LeaseSnapshot, LocalLease, Reserved};
pub(crate) use set::LeaseSet;
pub use shares::{BURST, ShareLimiter, ShareMiss, UNLIMITED_SHARE};

use arc_swap::ArcSwap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use switchyard_core::{Clock, FleetLimit, QuotaError, QuotaScope, SpendTags};
use tokio::sync::{Notify, watch};

use crate::command::PoolId;
use crate::view::LedgerView;

/// Reason given when the lease ran out and the ledger cannot be reached: the replica spent
/// what it held and may not spend more without a quorum.
pub const UNREACHABLE_REASON: &str = "quota_ledger_unreachable";
/// Reason given while the first lease of a budget (or a bigger one) is being fetched.
pub const PENDING_REASON: &str = "quota_lease_pending";

/// How long one slow renewal or journal sync keeps sizing leases: the observed latency halves
/// every this long without a slower one. Long enough to span the gaps between bursts of
/// writeback on a shared disk, short enough that leases shrink back within a minute.
const LATENCY_HALF_LIFE: Duration = Duration::from_secs(20);
/// Slowest latency leases are sized for: a renewal slower than a lease's TTL fails anyway.
const LATENCY_CAP: Duration = Duration::from_secs(10);

/// Which way a reservation went (each is a metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    Unbudgeted,
    Lease,
    Override,
    Exhausted,
    Unreachable,
    Pending,
    /// The request waited `renewal_wait` for a renewal that did not arrive, while the
    /// ledger was reachable and could still grant the tokens: a slow commit, not a spent
    /// budget (503 with `Retry-After`).
    RenewalLate,
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
    /// Wakes the spend journal's writer to raise a ceiling.
    journal_kick: Notify,
    /// Counts the keeper's renewal attempts (whatever their outcome): what a request waiting
    /// for a renewal watches.
    answers: watch::Sender<u64>,
    /// How long this node's lease renewals took to commit lately (decaying maximum).
    renewal_latency: LatencyTracker,
    /// How long this node's spend-journal syncs took lately (decaying maximum).
    journal_latency: LatencyTracker,
}

impl LeaseTable {
    pub(crate) fn new(clock: Arc<dyn Clock>, view: Arc<ArcSwap<LedgerView>>) -> Self {
        Self {
            clock,
            set: ArcSwap::from_pointee(LeaseSet::default()),
            view,
            reachable: AtomicBool::new(true),
            kick: Notify::new(),
            journal_kick: Notify::new(),
            answers: watch::Sender::new(0),
            renewal_latency: LatencyTracker::new(LATENCY_HALF_LIFE, LATENCY_CAP),
            journal_latency: LatencyTracker::new(LATENCY_HALF_LIFE, LATENCY_CAP),
        }
    }

    /// Renewal round trips (write to commit) as observed by the keeper.
    pub(crate) fn renewal_latency(&self) -> &LatencyTracker {
        &self.renewal_latency
    }

    /// Spend-journal syncs as observed by the writer and the keeper.
    pub(crate) fn journal_latency(&self) -> &LatencyTracker {
        &self.journal_latency
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

    pub(crate) fn journal_kicked(&self) -> &Notify {
        &self.journal_kick
    }

    pub(crate) fn set_reachable(&self, reachable: bool) {
        self.reachable.store(reachable, Ordering::Relaxed);
    }

    pub fn ledger_reachable(&self) -> bool {
        self.reachable.load(Ordering::Relaxed)
    }

    /// Matches the local leases to the pools in the applied view: a lease per budget, per
    /// extra period limit and per active override, kept across calls so counters survive;
    /// gone pools are dropped.
    pub(crate) fn sync_with_view(&self) -> bool {
        let view = self.view.load();
        match self.set.load().synced(&view, self.clock.now()) {
            Some(next) => {
                self.set.store(Arc::new(next));
                true
            }
            None => false,
        }
    }

    /// Called by the keeper after every renewal attempt, once the lease and the
    /// reachability flag show its outcome, and by the journal writer after every sync, so
    /// waiting requests look again.
    pub(crate) fn note_answer(&self) {
        self.answers.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Changes at the keeper's next renewal answer. Subscribe before trying the lease, so an
    /// answer in between is not missed.
    pub(crate) fn watch_answers(&self) -> watch::Receiver<u64> {
        self.answers.subscribe()
    }

    /// The hot path: a slot within this node's rate and concurrency shares, then tokens from
    /// the local lease and every extra period limit of the scope, then from a covering
    /// override.
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
        let missed = match budget {
            Some(lease) => match lease.try_reserve(tokens, now) {
                Ok(reserved) => match reserve_periods(&set, &tags.scope, tokens, now) {
                    Ok(periods) => {
                        if reserved.renew_now || periods.renew_now {
                            self.kick.notify_one();
                        }
                        if reserved.journal_now || periods.journal_now {
                            self.journal_kick.notify_one();
                        }
                        return Ok(Decision::Lease);
                    }
                    Err((period, miss)) => {
                        lease.settle(tokens, 0);
                        (Some(period), miss)
                    }
                },
                Err(miss) => (Some(lease.clone()), miss),
            },
            None => {
                let view = self.view.load();
                if view.budget(&tags.scope).is_none() {
                    return Ok(Decision::Unbudgeted);
                }
                self.kick.notify_one();
                (None, LeaseMiss::NoLease)
            }
        };
        if missed.1 == LeaseMiss::Unjournaled {
            // The budget has the tokens; only the journal's sync is missing (milliseconds).
            if let Some(lease) = budget {
                lease.release_shares(tokens, 0);
            }
            self.journal_kick.notify_one();
            return Err(pending());
        }
        let mut override_unjournaled = false;
        for (active, lease) in &set.overrides {
            if !active.covers(&tags.scope.caller, tags.purpose) {
                continue;
            }
            match lease.try_reserve(tokens, now) {
                Ok(reserved) => {
                    if reserved.journal_now {
                        self.journal_kick.notify_one();
                    }
                    return Ok(Decision::Override);
                }
                Err(LeaseMiss::Unjournaled) => {
                    override_unjournaled = true;
                    self.journal_kick.notify_one();
                }
                Err(_) => {}
            }
        }
        if let Some(lease) = budget {
            lease.release_shares(tokens, 0);
        }
        if override_unjournaled {
            return Err(pending());
        }
        let (lease, miss) = missed;
        let pool = PoolId::Budget(tags.scope.clone());
        let pool = lease.as_ref().map_or(&pool, |l| &l.pool);
        Err(self.refusal(tags, pool, lease.as_deref(), miss, tokens, now))
    }

    /// Why the lease of `pool` could not pay. While the ledger is reachable the answer is
    /// never "unavailable" for good: `Pending` means a renewal was asked for that may cover
    /// the request (the caller may wait for it); when nothing the ledger could grant would
    /// cover it, the budget is spent or held by other replicas for now (429).
    fn refusal(
        &self,
        tags: &SpendTags,
        pool: &PoolId,
        lease: Option<&LocalLease>,
        miss: LeaseMiss,
        tokens: u64,
        now: Instant,
    ) -> Refused {
        let view = self.view.load();
        let reachable = self.ledger_reachable();
        let unavailable = |decision, reason: &str| Refused {
            decision,
            error: QuotaError::Unavailable {
                reason: reason.to_owned(),
            },
        };
        if !reachable && miss != LeaseMiss::Short {
            // The keeper tries again at once: the leader may be back already.
            self.kick.notify_one();
            return unavailable(Decision::Unreachable, UNREACHABLE_REASON);
        }
        if let Some(summary) = view.pool(pool) {
            let left = lease.map_or(0, |l| l.snapshot().remaining(now));
            let could_grant = summary
                .limit
                .saturating_sub(summary.committed)
                .saturating_add(left);
            let refused_lately = lease.is_some_and(|l| l.backing_off(now));
            if could_grant < tokens || refused_lately {
                return exhausted(tags, summary.limit, summary.committed);
            }
        }
        self.kick.notify_one();
        if reachable {
            unavailable(Decision::Pending, PENDING_REASON)
        } else {
            unavailable(Decision::Unreachable, UNREACHABLE_REASON)
        }
    }

    /// The final word on a request that waited for a renewal in vain while the ledger was
    /// reachable. 429 only when the budget (or an extra period limit of the scope) cannot
    /// cover it: what the ledger could still grant plus this node's lease remainder is below
    /// the request, or the ledger refused this node's lease lately (what the fleet has left is
    /// in other replicas' leases). Otherwise the renewal is merely slow (a slow leader disk,
    /// a distant leader): 503 with `Retry-After`, never a spent budget the tenant is far from.
    pub(crate) fn held_elsewhere(&self, tags: &SpendTags, tokens: u64) -> Refused {
        let view = self.view.load();
        let set = self.set.load();
        let now = self.clock.now();
        if view.budget(&tags.scope).is_none() {
            return pending();
        }
        let lease = set.budgets.get(&tags.scope);
        let pools = std::iter::once((PoolId::Budget(tags.scope.clone()), lease.cloned())).chain(
            set.periods
                .get(&tags.scope)
                .into_iter()
                .flatten()
                .map(|period| (period.pool.clone(), Some(period.clone()))),
        );
        for (pool, lease) in pools {
            let Some(summary) = view.pool(&pool) else {
                continue;
            };
            let left = lease.as_ref().map_or(0, |l| l.snapshot().remaining(now));
            let could_grant = summary
                .limit
                .saturating_sub(summary.committed)
                .saturating_add(left);
            let refused_lately = lease.as_ref().is_some_and(|l| l.backing_off(now));
            if could_grant < tokens || refused_lately {
                return exhausted(tags, summary.limit, summary.committed.max(summary.spent));
            }
        }
        Refused {
            decision: Decision::RenewalLate,
            error: QuotaError::Unavailable {
                reason: PENDING_REASON.to_owned(),
            },
        }
    }

    /// Settles against the lease the reservation came from (and the scope's extra period
    /// limits); answers tokens beyond the debt allowance (0 when unbudgeted).
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
        if under_override {
            return set
                .overrides
                .iter()
                .filter(|(o, _)| o.covers(&tags.scope.caller, tags.purpose))
                .map(|(_, lease)| lease)
                .find(|lease| lease.snapshot().inflight >= estimate)
                .map_or(0, |lease| lease.settle(estimate, actual));
        }
        let Some(budget) = set.budgets.get(&tags.scope) else {
            return 0;
        };
        let overrun = budget.settle(estimate, actual);
        for period in set.periods.get(&tags.scope).into_iter().flatten() {
            period.settle(estimate, actual);
        }
        overrun
    }

    /// `(spent + this node's unreported use) / limit`, the highest over the scope's budget
    /// and its extra period limits; other nodes' use since their last renewal shows up when
    /// they renew.
    pub(crate) fn water_level(&self, scope: &QuotaScope) -> Option<f64> {
        let view = self.view.load();
        let set = self.set.load();
        let level = |pool: &PoolId, lease: Option<&Arc<LocalLease>>| {
            let summary = view.pool(pool)?;
            let local = lease.map_or(0, |lease| {
                let s = lease.snapshot();
                s.used_total.saturating_sub(s.used_at_renewal)
            });
            let used = summary.spent.saturating_add(local);
            Some(used as f64 / summary.limit.max(1) as f64)
        };
        let budget = level(&PoolId::Budget(scope.clone()), set.budgets.get(scope))?;
        let periods = set
            .periods
            .get(scope)
            .into_iter()
            .flatten()
            .filter_map(|lease| level(&lease.pool, Some(lease)));
        Some(periods.fold(budget, f64::max))
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

/// Takes `tokens` from every extra period lease of `scope`, or from none: answers whether one
/// should be renewed (or journaled) now, or the lease that could not pay.
fn reserve_periods(
    set: &LeaseSet,
    scope: &QuotaScope,
    tokens: u64,
    now: Instant,
) -> Result<Reserved, (Arc<LocalLease>, LeaseMiss)> {
    let Some(periods) = set.periods.get(scope) else {
        return Ok(Reserved::default());
    };
    let mut all = Reserved::default();
    for (taken, lease) in periods.iter().enumerate() {
        match lease.try_reserve(tokens, now) {
            Ok(reserved) => {
                all.renew_now |= reserved.renew_now;
                all.journal_now |= reserved.journal_now;
            }
            Err(miss) => {
                for earlier in &periods[..taken] {
                    earlier.settle(tokens, 0);
                }
                return Err((lease.clone(), miss));
            }
        }
    }
    Ok(all)
}

fn pending() -> Refused {
    Refused {
        decision: Decision::Pending,
        error: QuotaError::Unavailable {
            reason: PENDING_REASON.to_owned(),
        },
    }
}

fn exhausted(tags: &SpendTags, limit: u64, used: u64) -> Refused {
    Refused {
        decision: Decision::Exhausted,
        error: QuotaError::Exhausted {
            scope: tags.scope.clone(),
            limit,
            used,
        },
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

#[cfg(test)]
#[path = "table_tests.rs"]
mod table_tests;
