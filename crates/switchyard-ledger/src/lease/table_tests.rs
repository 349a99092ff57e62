//! What a request that waited out `renewal_wait` is told: exhausted only when the budget
//! cannot cover it, a retry otherwise.

use super::*;
use crate::command::LeaseGrant;
use crate::view::PoolSummary;
use std::time::Duration;
use switchyard_core::{ManualClock, Priority, Purpose};

fn tags() -> SpendTags {
    SpendTags {
        scope: QuotaScope::caller("acme"),
        purpose: Purpose::Business,
        priority: Priority::P1,
    }
}

fn summary(limit: u64, committed: u64) -> PoolSummary {
    PoolSummary {
        limit,
        spent: committed,
        committed,
        closed: false,
        leases: 3,
    }
}

/// A table whose view has the budget (and, if given, a month limit) of `acme`.
fn table(budget: PoolSummary, month: Option<PoolSummary>) -> (LeaseTable, ManualClock) {
    let clock = ManualClock::new();
    let mut view = LedgerView::default();
    view.pools
        .insert(PoolId::Budget(QuotaScope::caller("acme")), budget);
    if let Some(month) = month {
        view.pools.insert(
            PoolId::Period(QuotaScope::caller("acme"), 30 * 86_400_000),
            month,
        );
    }
    let table = LeaseTable::new(
        Arc::new(clock.clone()),
        Arc::new(ArcSwap::from_pointee(view)),
    );
    table.sync_with_view();
    (table, clock)
}

fn grant(granted_total: u64) -> LeaseGrant {
    LeaseGrant {
        pool: PoolId::Budget(QuotaScope::caller("acme")),
        epoch: 1,
        granted_total,
        max_debt_tokens: 0,
        expires_at_ms: 0,
        ttl_ms: 10_000,
        rate_share_per_s: UNLIMITED_SHARE,
        concurrency_share: UNLIMITED_SHARE,
    }
}

#[test]
fn far_from_the_limit_a_late_renewal_is_a_retry() {
    // 10,000 of 150,000 committed: the renewal was slow, the budget is not spent.
    let (table, _) = table(summary(150_000, 10_000), None);
    let refused = table.held_elsewhere(&tags(), 50);
    assert_eq!(refused.decision, Decision::RenewalLate);
    assert_eq!(
        refused.error,
        QuotaError::Unavailable {
            reason: PENDING_REASON.to_owned()
        }
    );
}

#[test]
fn what_the_ledger_cannot_grant_is_exhausted() {
    // 40 tokens left unheld in the budget, none in this node's lease: the rest is in other
    // replicas' leases.
    let (table, _) = table(summary(150_000, 149_960), None);
    assert_eq!(
        table.held_elsewhere(&tags(), 50).decision,
        Decision::Exhausted
    );
    // This node's own lease remainder counts as grantable.
    let (table, _clock) = table_with_lease(summary(150_000, 149_960), 100, 80);
    assert_eq!(
        table.held_elsewhere(&tags(), 50).decision,
        Decision::RenewalLate,
        "40 unheld + 20 left in the lease cover 50"
    );
    assert_eq!(
        table.held_elsewhere(&tags(), 70).decision,
        Decision::Exhausted
    );
}

/// A table whose `acme` lease holds `granted`, `used` of it spent.
fn table_with_lease(budget: PoolSummary, granted: u64, used: u64) -> (LeaseTable, ManualClock) {
    let (table, clock) = table(budget, None);
    let now = clock.now();
    let lease = table
        .set()
        .budgets
        .get(&QuotaScope::caller("acme"))
        .cloned();
    let lease = lease.expect("the view's budget has a lease");
    lease.apply_grant(&grant(granted), now, Duration::ZERO, now, u64::MAX);
    lease.try_reserve(used, now).expect("within the grant");
    (table, clock)
}

#[test]
fn a_lease_the_ledger_refused_lately_is_exhausted() {
    let (table, clock) = table(summary(150_000, 10_000), None);
    let lease = table
        .set()
        .budgets
        .get(&QuotaScope::caller("acme"))
        .cloned();
    lease
        .expect("a lease")
        .clear(clock.now() + Duration::from_secs(5));
    assert_eq!(
        table.held_elsewhere(&tags(), 50).decision,
        Decision::Exhausted
    );
    // Past the back-off the ledger will be asked again: a retry.
    clock.advance(Duration::from_secs(5));
    assert_eq!(
        table.held_elsewhere(&tags(), 50).decision,
        Decision::RenewalLate
    );
}

#[test]
fn a_spent_month_limit_is_exhausted_though_the_day_is_not() {
    let (table, _) = table(summary(150_000, 10_000), Some(summary(60_000, 59_990)));
    match table.held_elsewhere(&tags(), 50).error {
        QuotaError::Exhausted { limit, .. } => assert_eq!(limit, 60_000),
        other => panic!("expected the month limit, got {other:?}"),
    }
}
