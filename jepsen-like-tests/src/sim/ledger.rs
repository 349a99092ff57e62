//! The in-memory cluster's ledger: one linearizable copy of budgets, overrides, affinity and
//! reports, with switchable bugs that break exactly one rule each.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use switchyard_core::QuotaScope;
use tokio::time::Instant;

use super::bugs::SimBugs;
use crate::history::{ErrorInfo, Op, OpResult, OverrideView};
use crate::state::{BudgetState, NodeState, OverrideState, OverrideStatus, ReportId, scope_covers};
use crate::workload::Completion;

/// Unapproved proposals lapse after this long.
const PENDING_TTL: Duration = Duration::from_secs(60);
const MAX_OVERRIDE_MS: u64 = 2 * 60 * 60 * 1000;

#[derive(Clone, Debug)]
struct SimOverride {
    state: OverrideState,
    deadline: Instant,
    remaining: u64,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct SimLedger {
    budgets: BTreeMap<QuotaScope, BudgetState>,
    accounted: BTreeMap<QuotaScope, u64>,
    overrides: BTreeMap<u64, SimOverride>,
    affinity: BTreeMap<u64, String>,
    reports: BTreeSet<ReportId>,
}

fn refuse(status: u16, reason: &str) -> Completion {
    Completion::Fail(ErrorInfo::http(status, reason))
}

impl SimLedger {
    pub(crate) fn with_budgets(budgets: &BTreeMap<QuotaScope, u64>) -> Self {
        let mut ledger = Self::default();
        for (scope, limit) in budgets {
            ledger.budgets.insert(
                scope.clone(),
                BudgetState {
                    limit: *limit,
                    ..BudgetState::default()
                },
            );
            ledger.accounted.insert(scope.clone(), 0);
        }
        ledger
    }

    fn expire(&mut self, now: Instant) {
        for o in self.overrides.values_mut() {
            let live = matches!(
                o.state.status,
                OverrideStatus::Pending | OverrideStatus::Active
            );
            if live && o.deadline <= now {
                o.state.status = OverrideStatus::Expired;
            }
        }
    }

    pub(crate) fn apply(&mut self, op: &Op, now: Instant, bugs: &SimBugs) -> Completion {
        self.expire(now);
        match op {
            Op::Spend {
                caller,
                purpose,
                max_tokens,
                ..
            } => self.spend(caller, *purpose, *max_tokens, bugs),
            Op::ReadSpend { scope } => Completion::Ok(OpResult::SpendTotal {
                tokens: self.accounted.get(scope).copied().unwrap_or(0),
            }),
            Op::ReportSpend { reporter, seq, .. } => {
                self.reports.insert(ReportId {
                    reporter: reporter.clone(),
                    seq: *seq,
                });
                Completion::Ok(OpResult::Reported)
            }
            Op::ProposeOverride {
                scope,
                extra_tokens,
                duration_ms,
                requester,
            } => {
                if *extra_tokens == 0 || *duration_ms == 0 || *duration_ms > MAX_OVERRIDE_MS {
                    return refuse(400, "override_invalid");
                }
                let id = self.overrides.keys().next_back().map_or(1, |max| max + 1);
                let state = OverrideState {
                    scope: scope.clone(),
                    extra_tokens: *extra_tokens,
                    duration_ms: *duration_ms,
                    requester: requester.clone(),
                    approver: None,
                    status: OverrideStatus::Pending,
                };
                self.overrides.insert(
                    id,
                    SimOverride {
                        state,
                        deadline: now + PENDING_TTL,
                        remaining: *extra_tokens,
                    },
                );
                Completion::Ok(OpResult::Proposed { id })
            }
            Op::ApproveOverride { id, approver } => self.approve(*id, approver, now, bugs),
            Op::RevokeOverride { id, .. } => match self.overrides.get_mut(id) {
                None => refuse(404, "override_not_found"),
                Some(o)
                    if matches!(
                        o.state.status,
                        OverrideStatus::Pending | OverrideStatus::Active
                    ) =>
                {
                    o.state.status = OverrideStatus::Revoked;
                    Completion::Ok(OpResult::Revoked)
                }
                Some(_) => refuse(409, "override_not_pending"),
            },
            Op::ListOverrides => Completion::Ok(OpResult::Overrides {
                records: self.listing(),
            }),
            Op::RecordAffinity { prefix_key, worker } => {
                self.affinity.insert(*prefix_key, worker.clone());
                Completion::Ok(OpResult::Recorded)
            }
        }
    }

    fn spend(
        &mut self,
        caller: &str,
        purpose: switchyard_core::Purpose,
        max_tokens: u64,
        bugs: &SimBugs,
    ) -> Completion {
        // The settled count is a fixed share of the reservation: deterministic, and below it.
        let tokens = (max_tokens * 3).div_ceil(4);
        let scopes: Vec<QuotaScope> = self
            .budgets
            .keys()
            .filter(|s| scope_covers(s, caller, purpose))
            .cloned()
            .collect();
        let fits = scopes.iter().all(|s| {
            self.budgets
                .get(s)
                .is_some_and(|b| b.spent.saturating_add(max_tokens) <= b.limit)
        });
        let mut override_id = None;
        if !fits && !bugs.over_admit {
            let usable = self.overrides.iter_mut().find(|(_, o)| {
                o.state.status == OverrideStatus::Active
                    && scope_covers(&o.state.scope, caller, purpose)
                    && o.remaining >= max_tokens
            });
            let Some((id, o)) = usable else {
                return refuse(429, "quota_exhausted");
            };
            o.remaining -= tokens;
            override_id = Some(*id);
        } else {
            for s in &scopes {
                if let Some(b) = self.budgets.get_mut(s) {
                    b.spent += tokens;
                }
            }
        }
        for s in &scopes {
            *self.accounted.entry(s.clone()).or_default() += tokens;
        }
        Completion::Ok(OpResult::Spent {
            tokens,
            override_id,
        })
    }

    fn approve(&mut self, id: u64, approver: &str, now: Instant, bugs: &SimBugs) -> Completion {
        let Some(o) = self.overrides.get_mut(&id) else {
            return refuse(404, "override_not_found");
        };
        let renewable = bugs.renewal && o.state.status != OverrideStatus::Revoked;
        if o.state.status != OverrideStatus::Pending && !renewable {
            return refuse(409, "override_not_pending");
        }
        let own = o
            .state
            .requester
            .trim()
            .eq_ignore_ascii_case(approver.trim());
        if own && !bugs.self_approval {
            return refuse(403, "two_person_rule");
        }
        o.state.status = OverrideStatus::Active;
        o.state.approver = Some(approver.to_owned());
        o.deadline = now + Duration::from_millis(o.state.duration_ms);
        Completion::Ok(OpResult::Approved)
    }

    pub(crate) fn listing(&self) -> Vec<OverrideView> {
        self.overrides
            .iter()
            .map(|(id, o)| OverrideView {
                id: *id,
                status: o.state.status,
                requester: o.state.requester.clone(),
                approver: o.state.approver.clone(),
            })
            .collect()
    }

    /// Forgets the most recent override proposal (the "lost write" bug; overrides are never
    /// rewritten, so the loss stays visible).
    pub(crate) fn lose_latest_write(&mut self) {
        self.overrides.pop_last();
    }

    pub(crate) fn node_state(&self, now: Instant) -> NodeState {
        let mut copy = self.clone();
        copy.expire(now);
        NodeState {
            applied_index: None,
            budgets: copy.budgets,
            accounted_tokens: copy.accounted,
            leases: BTreeMap::new(),
            overrides: copy
                .overrides
                .into_iter()
                .map(|(id, o)| (id, o.state))
                .collect(),
            affinity: copy.affinity,
            spend_reports: Some(copy.reports),
        }
    }
}
