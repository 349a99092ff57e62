//! The lease's latency covers: renewing before a slow commit would leave it dry, and a
//! journal step that outlasts a slow sync. Deterministic: spend is driven by hand.

use super::*;
use switchyard_core::QuotaScope;

fn grant(epoch: u64, granted_total: u64) -> LeaseGrant {
    LeaseGrant {
        pool: PoolId::Budget(QuotaScope::caller("a")),
        epoch,
        granted_total,
        max_debt_tokens: 0,
        expires_at_ms: 0,
        ttl_ms: 10_000,
        rate_share_per_s: crate::lease::UNLIMITED_SHARE,
        concurrency_share: crate::lease::UNLIMITED_SHARE,
    }
}

fn lease_with(granted: u64, renew_cover: u64, journal_cover: u64) -> (LocalLease, Instant) {
    let t0 = Instant::now();
    let lease = LocalLease::new(PoolId::Budget(QuotaScope::caller("a")), t0);
    lease.set_cover(renew_cover, journal_cover);
    let g = grant(1, granted);
    let first = lease.first_ceiling(&g);
    lease.apply_grant(&g, t0, Duration::ZERO, t0, first);
    (lease, t0)
}

/// Reserves 10 tokens at a time; answers the spend at which the first renewal was asked for.
fn spend_until_renewal(lease: &LocalLease, t0: Instant) -> Option<u64> {
    loop {
        let before = lease.snapshot().used_total;
        match lease.try_reserve(10, t0) {
            Ok(r) if r.renew_now => return Some(before + 10),
            Ok(r) => {
                if r.journal_now
                    && let Some((epoch, ceiling)) = lease.journal_due()
                {
                    lease.journal_synced(epoch, ceiling);
                }
            }
            Err(LeaseMiss::Unjournaled) => {
                let (epoch, ceiling) = lease.journal_due()?;
                lease.journal_synced(epoch, ceiling);
            }
            Err(_) => return None,
        }
    }
}

#[test]
fn renewal_is_asked_for_before_less_than_the_cover_is_left() {
    // No latency observed: at half the grant, as before.
    let (lease, t0) = lease_with(1_000, 0, 0);
    assert_eq!(spend_until_renewal(&lease, t0), Some(500));
    // A slow commit's worth of spend (700 tokens) is more than half: renew at 300, when 700
    // are left.
    let (lease, t0) = lease_with(1_000, 700, 0);
    assert_eq!(spend_until_renewal(&lease, t0), Some(300));
    assert!(lease.snapshot().renewal_due());
    // A cover larger than the grant (a budget's shrinking tail): not before a quarter is
    // used, so a small grant does not renew on every request.
    let (lease, t0) = lease_with(1_000, 5_000, 0);
    assert_eq!(spend_until_renewal(&lease, t0), Some(250));
    let (lease, _) = lease_with(1_000, 5_000, 0);
    assert!(!lease.snapshot().renewal_due(), "nothing spent yet");
}

#[test]
fn the_renew_point_follows_the_cover_set_between_grants() {
    let (lease, t0) = lease_with(1_000, 0, 0);
    lease.journal_synced(1, 1_000);
    for _ in 0..30 {
        lease.try_reserve(10, t0).unwrap();
    }
    assert!(!lease.snapshot().renewal_due(), "300 of 1,000 used");
    // The keeper saw a slow renewal: 800 tokens of spend while one commits.
    lease.set_cover(800, 0);
    assert!(lease.snapshot().renewal_due(), "700 left, below the cover");
}

#[test]
fn the_journal_step_covers_a_few_slow_syncs_within_the_grant() {
    assert_eq!(
        journal_step(1_000, 10, 0),
        250,
        "a quarter of the fresh grant"
    );
    assert_eq!(
        journal_step(1_000, 10, 600),
        600,
        "the spend during slow syncs"
    );
    assert_eq!(
        journal_step(1_000, 10, 5_000),
        1_000,
        "never past the grant"
    );
    assert_eq!(
        journal_step(1_000, 400, 600),
        1_600,
        "four of the largest requests"
    );
    let (lease, _) = lease_with(1_000, 0, 600);
    assert_eq!(
        lease.snapshot().journaled,
        600,
        "the first ceiling is a step ahead"
    );
}

/// Spends 10 tokens per tick; a journal sync asked for at tick `t` lands at `t + sync_ticks`.
/// Answers how many reservations found the ceiling below them.
fn unjournaled_stalls(journal_cover: u64, sync_ticks: usize) -> usize {
    let (lease, t0) = lease_with(10_000, 0, journal_cover);
    let mut in_flight: Option<(usize, u64, u64)> = None;
    let mut stalls = 0;
    for tick in 0..900 {
        if let Some((at, epoch, ceiling)) = in_flight
            && tick >= at
        {
            lease.journal_synced(epoch, ceiling);
            in_flight = None;
        }
        let ask = match lease.try_reserve(10, t0) {
            Ok(r) => r.journal_now,
            Err(LeaseMiss::Unjournaled) => {
                stalls += 1;
                true
            }
            Err(miss) => panic!("{miss:?} at tick {tick}"),
        };
        if ask
            && in_flight.is_none()
            && let Some((epoch, ceiling)) = lease.journal_due()
        {
            in_flight = Some((tick + sync_ticks, epoch, ceiling));
        }
    }
    stalls
}

#[test]
fn a_slow_sync_stalls_reservations_unless_the_step_covers_it() {
    // 10 tokens per tick, a step of 2,500 (a quarter of the grant): syncs are asked for with
    // 1,250 tokens of headroom left, 125 ticks of spend.
    assert_eq!(
        unjournaled_stalls(0, 100),
        0,
        "a sync faster than the headroom"
    );
    assert!(
        unjournaled_stalls(0, 200) > 0,
        "a sync slower than the headroom"
    );
    // The keeper sized the cover for the slow disk: 3 syncs of 200 ticks × 10 tokens.
    assert_eq!(unjournaled_stalls(6_000, 200), 0);
}
