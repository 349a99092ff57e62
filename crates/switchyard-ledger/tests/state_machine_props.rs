#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Property tests of the deterministic state machine: random interleavings of budget
//! changes, lease grants and renewals by simulated nodes that really spend their leases,
//! releases, expiries (time jumps), overrides, spend reports, and restarts that report the
//! previous process's leases from a spend journal (a ceiling at or above what was spent).
//!
//! Checked after every applied entry: `spent + holds ≤ limit` for every pool, and the tokens
//! the simulated nodes really spent never exceed the limit. Checked at the end: replaying the
//! same log (whole, or from a snapshot taken halfway) gives the same state.

use proptest::prelude::*;
use std::collections::BTreeMap;
use switchyard_core::{Priority, Purpose, QuotaScope};
use switchyard_ledger::codec::{decode, encode};
use switchyard_ledger::command::{
    BudgetSpec, Command, CommandResponse, LeaseRequest, PoolId, SpendReport, SpendTotals, SplitKey,
};
use switchyard_ledger::state::LedgerState;

const LIMIT: u64 = 10_000;
const DEBT: u64 = 50;
const NODES: u64 = 3;

#[derive(Clone, Debug)]
enum Step {
    Acquire {
        node: u64,
        demand: u64,
        keep: u64,
    },
    Spend {
        node: u64,
        tokens: u64,
        overshoot: bool,
    },
    Release {
        node: u64,
    },
    Forget {
        node: u64,
    },
    Restart {
        node: u64,
        journal_slack: u64,
    },
    Advance {
        ms: u64,
    },
    Propose {
        extra: u64,
        same_person: bool,
    },
    Approve {
        same_person: bool,
    },
    AcquireOverride {
        node: u64,
        demand: u64,
    },
    Report {
        node: u64,
        seq: u64,
        tokens: u64,
    },
    RaiseLimit {
        by: u64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..NODES, 1..4_000u64, 0..2_000u64)
            .prop_map(|(node, demand, keep)| Step::Acquire { node, demand, keep }),
        6 => (0..NODES, 1..800u64, any::<bool>())
            .prop_map(|(node, tokens, overshoot)| Step::Spend { node, tokens, overshoot }),
        1 => (0..NODES).prop_map(|node| Step::Release { node }),
        1 => (0..NODES).prop_map(|node| Step::Forget { node }),
        2 => (0..NODES, 0..600u64)
            .prop_map(|(node, journal_slack)| Step::Restart { node, journal_slack }),
        3 => (0..15_000u64).prop_map(|ms| Step::Advance { ms }),
        1 => (1..5_000u64, any::<bool>())
            .prop_map(|(extra, same_person)| Step::Propose { extra, same_person }),
        1 => any::<bool>().prop_map(|same_person| Step::Approve { same_person }),
        2 => (0..NODES, 1..3_000u64).prop_map(|(node, demand)| Step::AcquireOverride { node, demand }),
        1 => (0..NODES, 0..4u64, 0..500u64)
            .prop_map(|(node, seq, tokens)| Step::Report { node, seq, tokens }),
        1 => (0..2_000u64).prop_map(|by| Step::RaiseLimit { by }),
    ]
}

/// What a simulated node knows about one of its leases.
#[derive(Clone, Debug, Default)]
struct NodeLease {
    epoch: Option<u64>,
    granted_total: u64,
    used_total: u64,
    /// Ledger time after which the node no longer spends (expiry minus margin).
    stop_at_ms: u64,
    max_debt: u64,
}

struct Sim {
    state: LedgerState,
    log: Vec<(u64, u64, Command)>,
    now_ms: u64,
    leases: BTreeMap<(u64, PoolId), NodeLease>,
    /// Tokens really spent per pool since the start (no period rollover in this test).
    real_spent: BTreeMap<PoolId, u64>,
    last_proposal: Option<u64>,
    limit: u64,
}

impl Sim {
    fn apply(&mut self, command: Command) -> CommandResponse {
        let index = self.log.len() as u64 + 1;
        self.log.push((index, self.now_ms, command.clone()));
        let response = self.state.apply(index, self.now_ms, &command);
        self.state.check_invariant().expect("budget invariant");
        response
    }

    fn acquire(&mut self, node: u64, pool: PoolId, demand: u64, keep: u64) {
        let lease = self.leases.entry((node, pool.clone())).or_default();
        let live = lease.epoch.is_some() && self.now_ms < lease.stop_at_ms;
        if lease.epoch.is_some() {
            let cap = if live {
                lease.used_total
                    + lease
                        .granted_total
                        .saturating_sub(lease.used_total)
                        .min(keep)
            } else {
                lease.used_total
            };
            lease.granted_total = lease.granted_total.min(cap);
        }
        let request = LeaseRequest {
            node,
            pool: pool.clone(),
            epoch: lease.epoch,
            used_total: lease.used_total,
            cap_total: lease.granted_total.max(lease.used_total),
            demand,
            ttl_ms: 10_000,
        };
        if let CommandResponse::Lease(Ok(grant)) = self.apply(Command::AcquireLease(request)) {
            let lease = self.leases.entry((node, pool)).or_default();
            if lease.epoch != Some(grant.epoch) {
                lease.epoch = Some(grant.epoch);
                lease.used_total = 0;
            }
            assert!(grant.granted_total >= lease.granted_total.min(lease.used_total));
            lease.granted_total = grant.granted_total;
            lease.max_debt = grant.max_debt_tokens;
            lease.stop_at_ms = grant.expires_at_ms.saturating_sub(1_000);
        }
    }

    fn spend(&mut self, node: u64, tokens: u64, overshoot: bool) {
        let now = self.now_ms;
        let pools: Vec<PoolId> = self
            .leases
            .keys()
            .filter(|(n, _)| *n == node)
            .map(|(_, p)| p.clone())
            .collect();
        for pool in pools {
            let lease = self.leases.get_mut(&(node, pool.clone())).unwrap();
            if lease.epoch.is_none() || now >= lease.stop_at_ms {
                continue;
            }
            let ceiling = if overshoot {
                lease.granted_total + lease.max_debt
            } else {
                lease.granted_total
            };
            let take = tokens.min(ceiling.saturating_sub(lease.used_total));
            lease.used_total += take;
            *self.real_spent.entry(pool).or_default() += take;
            return;
        }
    }

    fn check_real_spend(&self) {
        for (pool, spent) in &self.real_spent {
            let limit = match pool {
                PoolId::Budget(_) | PoolId::Period(..) => self.limit,
                PoolId::Override(id) => self.state.overrides.records[id].extra_tokens,
            };
            assert!(
                *spent <= limit,
                "{pool:?}: nodes really spent {spent} > {limit}"
            );
        }
    }
}

fn run(steps: Vec<Step>) -> Sim {
    let scope = QuotaScope::caller("acme");
    let budget = PoolId::Budget(scope.clone());
    let mut sim = Sim {
        state: LedgerState::default(),
        log: Vec::new(),
        now_ms: 1_000_000,
        leases: BTreeMap::new(),
        real_spent: BTreeMap::new(),
        last_proposal: None,
        limit: LIMIT,
    };
    let spec = |limit| BudgetSpec {
        limit_tokens: limit,
        period_ms: u64::MAX / 4,
        rate_tokens_per_s: 100,
        max_concurrency: 10,
        max_debt_tokens: DEBT,
        max_lease_tokens: 3_000,
    };
    sim.apply(Command::SetBudget {
        scope: scope.clone(),
        spec: spec(LIMIT),
        principal: "ops".into(),
    });
    for step in steps {
        match step {
            Step::Acquire { node, demand, keep } => sim.acquire(node, budget.clone(), demand, keep),
            Step::Spend {
                node,
                tokens,
                overshoot,
            } => sim.spend(node, tokens, overshoot),
            Step::Release { node } => {
                let held = sim.leases.remove(&(node, budget.clone()));
                if let Some((epoch, lease)) = held.and_then(|l| l.epoch.map(|e| (e, l))) {
                    sim.apply(Command::ReleaseLease {
                        node,
                        pool: budget.clone(),
                        epoch,
                        used_total: lease.used_total,
                    });
                }
            }
            // A restart: the node forgets its lease (and stops spending it).
            Step::Forget { node } => {
                sim.leases.retain(|(n, _), _| *n != node);
            }
            // A crash and restart with a spend journal: every lease the node held is reported
            // at the journal's ceiling (what it spent, or a little more), then forgotten.
            Step::Restart {
                node,
                journal_slack,
            } => {
                let held: Vec<(PoolId, NodeLease)> = sim
                    .leases
                    .iter()
                    .filter(|((n, _), _)| *n == node)
                    .map(|((_, pool), lease)| (pool.clone(), lease.clone()))
                    .collect();
                sim.leases.retain(|(n, _), _| *n != node);
                for (pool, lease) in held {
                    let Some(epoch) = lease.epoch else { continue };
                    sim.apply(Command::ReclaimLease {
                        node,
                        pool,
                        epoch,
                        spent_at_most: lease.used_total + journal_slack,
                    });
                }
            }
            Step::Advance { ms } => {
                sim.now_ms += ms;
                sim.apply(Command::Tick);
            }
            Step::Propose { extra, same_person } => {
                let response = sim.apply(Command::ProposeOverride {
                    scope: QuotaScope {
                        caller: "acme".into(),
                        purpose: Some(Purpose::Warmup),
                    },
                    extra_tokens: extra,
                    reason: "launch".into(),
                    duration_ms: if same_person {
                        3 * 60 * 60 * 1000
                    } else {
                        60_000
                    },
                    requester: "alice".into(),
                });
                if let CommandResponse::OverrideProposed { id } = response {
                    sim.last_proposal = Some(id);
                }
            }
            Step::Approve { same_person } => {
                if let Some(id) = sim.last_proposal {
                    let approver = if same_person { " ALICE " } else { "bob" };
                    let response = sim.apply(Command::ApproveOverride {
                        id,
                        approver: approver.into(),
                    });
                    if same_person {
                        assert!(matches!(response, CommandResponse::Rejected { .. }));
                    }
                }
            }
            Step::AcquireOverride { node, demand } => {
                let active: Vec<u64> = sim.state.overrides.active().map(|o| o.id).collect();
                for id in active {
                    sim.acquire(node, PoolId::Override(id), demand, demand);
                }
            }
            Step::Report { node, seq, tokens } => {
                sim.apply(Command::ReportSpend(SpendReport {
                    node,
                    boot_id: 1,
                    seq,
                    minute: sim.now_ms / 60_000,
                    lines: vec![(
                        SplitKey {
                            caller: "acme".into(),
                            purpose: Purpose::Business,
                            priority: Priority::P1,
                            under_override: false,
                        },
                        SpendTotals {
                            tokens,
                            requests: 1,
                        },
                    )],
                }));
            }
            Step::RaiseLimit { by } => {
                sim.limit += by;
                let limit = sim.limit;
                sim.apply(Command::SetBudget {
                    scope: scope.clone(),
                    spec: spec(limit),
                    principal: "ops".into(),
                });
            }
        }
        sim.check_real_spend();
    }
    sim
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn budget_invariant_holds_and_nodes_never_overspend(steps in prop::collection::vec(step(), 1..120)) {
        let sim = run(steps);
        // Once every lease has expired, everything the nodes spent is charged.
        let mut state = sim.state.clone();
        let end = sim.now_ms + 120_000;
        state.apply(sim.log.len() as u64 + 1, end, &Command::Tick);
        for (pool_id, pool) in &state.pools {
            prop_assert!(pool.leases.is_empty());
            let real = sim.real_spent.get(pool_id).copied().unwrap_or(0);
            prop_assert!(pool.spent >= real, "{:?}: charged {} < really spent {}", pool_id, pool.spent, real);
        }
    }

    #[test]
    fn same_log_gives_same_state_whole_or_from_a_snapshot(steps in prop::collection::vec(step(), 1..80)) {
        let sim = run(steps);
        let mut replica = LedgerState::default();
        for (index, ts, command) in &sim.log {
            replica.apply(*index, *ts, command);
        }
        prop_assert_eq!(&replica, &sim.state);

        let half = sim.log.len() / 2;
        let mut first = LedgerState::default();
        for (index, ts, command) in &sim.log[..half] {
            first.apply(*index, *ts, command);
        }
        let mut restored: LedgerState = decode(&encode(&first).unwrap()).unwrap();
        for (index, ts, command) in &sim.log[half..] {
            restored.apply(*index, *ts, command);
        }
        prop_assert_eq!(&restored, &sim.state);
    }
}
