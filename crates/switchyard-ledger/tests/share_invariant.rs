#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Property: whatever the interleaving of lease grants, renewals, releases and expiries, the
//! rate and concurrency shares a replica may still be using (its current grant, or the one
//! before while the new one is in flight) never sum past the budget's fleet-wide figures.

use proptest::prelude::*;
use std::collections::BTreeMap;
use switchyard_core::QuotaScope;
use switchyard_ledger::command::{LeaseGrant, LeaseRequest};
use switchyard_ledger::lease::UNLIMITED_SHARE;
use switchyard_ledger::state::{LedgerState, Pool};
use switchyard_ledger::{BudgetSpec, Command, CommandResponse, PoolId};

const RATE: u64 = 1_000;
const CONCURRENCY: u64 = 7;
const NODES: u64 = 4;

#[derive(Clone, Debug)]
enum Step {
    Renew { node: u64, demand: u64 },
    Release { node: u64 },
    Advance { ms: u64 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (1..=NODES, 1..50_000u64).prop_map(|(node, demand)| Step::Renew { node, demand }),
        1 => (1..=NODES).prop_map(|node| Step::Release { node }),
        2 => (1..12_000u64).prop_map(|ms| Step::Advance { ms }),
    ]
}

/// What each node holds: its epoch and the shares of its last two grants (it may still run
/// requests admitted under the older one until it has installed the newer).
#[derive(Clone, Copy, Debug, Default)]
struct Held {
    epoch: Option<u64>,
    shares: (u64, u64),
    previous: (u64, u64),
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn shares_in_use_never_exceed_the_fleet_figures(steps in prop::collection::vec(step(), 1..120)) {
        let scope = QuotaScope::caller("acme");
        let pool = PoolId::Budget(scope.clone());
        let mut state = LedgerState::default();
        let mut now = 1_000_000u64;
        let mut index = 0u64;
        let mut apply = |state: &mut LedgerState, now: u64, command: Command| {
            index += 1;
            state.apply(index, now, &command)
        };
        apply(&mut state, now, Command::SetBudget {
            scope: scope.clone(),
            spec: BudgetSpec {
                rate_tokens_per_s: RATE,
                max_concurrency: CONCURRENCY,
                ..BudgetSpec::daily(1 << 40)
            },
            principal: "ops".into(),
        });
        let mut held: BTreeMap<u64, Held> = BTreeMap::new();
        for step in steps {
            match step {
                Step::Renew { node, demand } => {
                    let h = held.entry(node).or_default();
                    let request = LeaseRequest {
                        node,
                        pool: pool.clone(),
                        epoch: h.epoch,
                        used_total: 0,
                        cap_total: 0,
                        demand,
                        ttl_ms: 10_000,
                    };
                    if let CommandResponse::Lease(Ok(grant)) =
                        apply(&mut state, now, Command::AcquireLease(request))
                    {
                        if h.epoch != Some(grant.epoch) {
                            // A new epoch: what the node ran under the old one is gone from
                            // the ledger's books only once that lease expired or was fenced.
                            h.previous = (0, 0);
                        } else {
                            h.previous = h.shares;
                        }
                        h.epoch = Some(grant.epoch);
                        h.shares = (grant.rate_share_per_s, grant.concurrency_share);
                    }
                }
                Step::Release { node } => {
                    if let Some(epoch) = held.get(&node).and_then(|h| h.epoch) {
                        apply(&mut state, now, Command::ReleaseLease {
                            node, pool: pool.clone(), epoch, used_total: 0,
                        });
                        held.remove(&node);
                    }
                }
                Step::Advance { ms } => {
                    now += ms;
                    apply(&mut state, now, Command::Tick);
                }
            }
            // Nodes whose lease the ledger dropped (expired) hold nothing any more: they
            // stopped spending before the ledger's expiry.
            let live = &state.pools[&pool].leases;
            held.retain(|node, h| live.get(node).is_some_and(|l| Some(l.epoch) == h.epoch));
            let (rate, concurrency) = held.values().fold((0, 0), |(r, c), h| {
                (r + h.shares.0.max(h.previous.0), c + h.shares.1.max(h.previous.1))
            });
            prop_assert!(rate <= RATE, "rate shares in use {rate} > {RATE}: {held:?}");
            prop_assert!(
                concurrency <= CONCURRENCY,
                "concurrency shares in use {concurrency} > {CONCURRENCY}: {held:?}"
            );
        }
    }
}

fn request(node: u64, epoch: Option<u64>) -> LeaseRequest {
    LeaseRequest {
        node,
        pool: PoolId::Budget(QuotaScope::caller("a")),
        epoch,
        used_total: 0,
        cap_total: 0,
        demand: 100,
        ttl_ms: 10_000,
    }
}

#[test]
fn a_newcomer_gets_its_share_once_the_holder_has_renewed_twice() {
    let id = PoolId::Budget(QuotaScope::caller("a"));
    let limited = BudgetSpec {
        rate_tokens_per_s: 900,
        max_concurrency: 6,
        ..BudgetSpec::daily(1_000_000)
    };
    let mut pool = Pool::new(limited, 0, None);
    let shares = |g: &LeaseGrant| (g.rate_share_per_s, g.concurrency_share);
    let a = pool.grant(&id, &request(1, None), 0).unwrap();
    assert_eq!(shares(&a), (900, 6), "alone: the whole fleet figure");
    let b = pool.grant(&id, &request(2, None), 1).unwrap();
    assert_eq!(
        shares(&b),
        (0, 0),
        "node 1 holds everything until it renews"
    );
    let a = pool.grant(&id, &request(1, Some(a.epoch)), 2).unwrap();
    assert_eq!(shares(&a), (450, 3), "equal demand, half each");
    let b = pool.grant(&id, &request(2, Some(b.epoch)), 3).unwrap();
    assert_eq!(
        shares(&b),
        (0, 0),
        "node 1 may still run requests admitted under its old share"
    );
    let a = pool.grant(&id, &request(1, Some(a.epoch)), 4).unwrap();
    let b = pool.grant(&id, &request(2, Some(b.epoch)), 5).unwrap();
    assert_eq!((shares(&a), shares(&b)), ((450, 3), (450, 3)));
    let c = pool.grant(&id, &request(3, None), 6).unwrap();
    assert_eq!(shares(&c), (0, 0), "nothing left until the others shrink");

    let mut open = Pool::new(BudgetSpec::daily(1_000), 0, None);
    let g = open.grant(&id, &request(1, None), 0).unwrap();
    assert_eq!(
        shares(&g),
        (UNLIMITED_SHARE, UNLIMITED_SHARE),
        "no fleet figures: nothing to enforce"
    );
}
