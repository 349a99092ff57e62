//! The lease's reservations, journal ceiling, renewal cap and epochs, driven by hand.

use super::*;
use switchyard_core::QuotaScope;

fn grant(epoch: u64, granted_total: u64, ttl_ms: u64) -> LeaseGrant {
    LeaseGrant {
        pool: PoolId::Budget(QuotaScope::caller("a")),
        epoch,
        granted_total,
        max_debt_tokens: 10,
        expires_at_ms: 0,
        ttl_ms,
        rate_share_per_s: crate::lease::UNLIMITED_SHARE,
        concurrency_share: crate::lease::UNLIMITED_SHARE,
    }
}

#[test]
fn reservations_stop_at_the_grant_and_at_the_deadline_minus_margin() {
    let lease = LocalLease::new(PoolId::Budget(QuotaScope::caller("a")), Instant::now());
    let t0 = Instant::now();
    assert_eq!(lease.try_reserve(1, t0), Err(LeaseMiss::NoLease));
    lease.apply_grant(
        &grant(1, 100, 10_000),
        t0,
        Duration::from_secs(1),
        t0,
        u64::MAX,
    );
    let renew = |r: Result<Reserved, LeaseMiss>| r.map(|r| r.renew_now);
    assert_eq!(renew(lease.try_reserve(40, t0)), Ok(false));
    assert_eq!(
        renew(lease.try_reserve(20, t0)),
        Ok(true),
        "crosses half the grant"
    );
    assert_eq!(lease.try_reserve(50, t0), Err(LeaseMiss::Short));
    assert_eq!(renew(lease.try_reserve(40, t0)), Ok(false));
    let late = t0 + Duration::from_secs(9);
    assert_eq!(lease.try_reserve(0, late), Err(LeaseMiss::Expired));
}

#[test]
fn settlement_refunds_and_debt_is_bounded() {
    let lease = LocalLease::new(PoolId::Budget(QuotaScope::caller("a")), Instant::now());
    let t0 = Instant::now();
    lease.apply_grant(&grant(1, 100, 10_000), t0, Duration::ZERO, t0, u64::MAX);
    lease.try_reserve(50, t0).unwrap();
    assert_eq!(lease.settle(50, 20), 0);
    assert_eq!(lease.snapshot().used_total, 20);
    lease.try_reserve(80, t0).unwrap();
    // 80 estimated, 100 real: 10 fits the debt allowance (ceiling 110), 10 is overrun.
    assert_eq!(lease.settle(80, 100), 10);
    assert_eq!(lease.snapshot().used_total, 110);
    assert_eq!(lease.snapshot().inflight, 0);
}

#[test]
fn renewal_caps_spending_before_sending_and_new_epochs_carry_inflight() {
    let lease = LocalLease::new(PoolId::Budget(QuotaScope::caller("a")), Instant::now());
    let t0 = Instant::now();
    lease.apply_grant(&grant(1, 1000, 10_000), t0, Duration::ZERO, t0, u64::MAX);
    lease.try_reserve(100, t0).unwrap();
    let req = lease.prepare_renewal(7, 50, Duration::from_secs(10), t0);
    assert_eq!(
        (req.used_total, req.cap_total, req.epoch),
        (100, 150, Some(1))
    );
    assert_eq!(lease.try_reserve(60, t0), Err(LeaseMiss::Short));
    lease.apply_grant(&grant(2, 500, 10_000), t0, Duration::ZERO, t0, u64::MAX);
    assert_eq!(lease.snapshot().used_total, 100, "in-flight carried over");
    assert_eq!(lease.settle(100, 0), 0);
    assert_eq!(lease.snapshot().used_total, 0);
}

#[test]
fn reservations_stop_at_the_journal_ceiling_until_a_higher_one_is_synced() {
    let lease = LocalLease::new(PoolId::Budget(QuotaScope::caller("a")), Instant::now());
    let t0 = Instant::now();
    let g = grant(1, 1000, 10_000);
    let first = lease.first_ceiling(&g);
    assert_eq!(first, 250, "a quarter of the fresh grant");
    lease.apply_grant(&g, t0, Duration::ZERO, t0, first);
    assert!(lease.journal_due().is_none(), "headroom is a full step");
    let journal_now = |tokens| lease.try_reserve(tokens, t0).map(|r| r.journal_now);
    assert_eq!(journal_now(40), Ok(false));
    assert_eq!(journal_now(60), Ok(false));
    assert_eq!(journal_now(50), Ok(true), "headroom 100 < half a step");
    assert_eq!(
        journal_now(60),
        Ok(true),
        "still low until the writer syncs"
    );
    assert_eq!(lease.try_reserve(60, t0), Err(LeaseMiss::Unjournaled));
    // The writer raises the ceiling to cover the waiting reservation plus a step.
    let (epoch, ceiling) = lease.journal_due().unwrap();
    assert_eq!((epoch, ceiling), (1, 520));
    lease.journal_synced(epoch, ceiling);
    assert!(lease.try_reserve(60, t0).is_ok());
    // Settlement overshoot is charged in full within the grant and its debt allowance,
    // and asks the writer for a ceiling that covers it.
    assert_eq!(lease.settle(60, 400), 0, "used 270 + 340 fits the grant");
    assert_eq!(lease.snapshot().used_total, 610);
    let (_, ceiling) = lease.journal_due().unwrap();
    assert!(ceiling >= 610, "{ceiling}");
    lease.journal_synced(1, ceiling);
    assert_eq!(lease.settle(0, 500), 100, "past grant 1000 + debt 10");
    assert_eq!(lease.snapshot().used_total, 1010);
    let (_, ceiling) = lease.journal_due().unwrap();
    assert_eq!(ceiling, 1010, "the journal covers the debt too");
    // A new epoch closes the old one and starts from its own synced ceiling.
    lease.apply_grant(&grant(2, 1000, 10_000), t0, Duration::ZERO, t0, 0);
    assert_eq!(lease.take_closed_epochs(), vec![1]);
    assert_eq!(lease.try_reserve(1, t0), Err(LeaseMiss::Unjournaled));
    // A synced ceiling of a replaced epoch raises nothing.
    lease.journal_synced(1, 1000);
    assert_eq!(lease.try_reserve(1, t0), Err(LeaseMiss::Unjournaled));
}
