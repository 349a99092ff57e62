//! The deterministic ledger state machine: `apply(index, ts, command) → response`, no I/O and
//! no clock of its own. Ledger time is the highest entry timestamp seen so far (stamped by the
//! proposing leader: `node/ledger_time.rs`), so replaying the same log gives the same state on
//! every replica.

mod affinity;
mod overrides;
mod pool;
mod reclaim;
mod requests;
mod spend;
mod unreported;

pub use affinity::{AffinityRecord, AffinityTable, MAX_AFFINITY_RECORDS};
pub use overrides::{
    AuditAction, AuditEntry, DEFAULT_AUDIT_RETENTION, OverrideRecord, OverrideRegistry,
    OverrideStatus, PENDING_TTL_MS,
};
pub use pool::{Lease, Pool};
pub use requests::{MAX_REMEMBERED_REQUESTS, REQUEST_MEMORY_MS, RequestLog};
pub use spend::{SPLIT_RETENTION_MINUTES, SpendLedger, SpendRatios};
pub use unreported::Unreported;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::command::{BudgetSpec, Command, CommandResponse, LeaseDenied, LedgerRequest, PoolId};

/// Counts kept inside the replicated state (same on every replica).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerCounters {
    pub lease_grants: u64,
    pub lease_denials: u64,
    pub lease_expiries: u64,
    pub lease_tokens_charged_on_expiry: u64,
    pub spend_batches_applied: u64,
    pub spend_batches_duplicate: u64,
    /// Writes answered from memory because their request id had applied before.
    pub duplicate_requests: u64,
    /// Tokens of expired, fenced or orphaned leases given back once their holder reported.
    pub lease_tokens_reclaimed: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerState {
    pub now_ms: u64,
    pub last_index: u64,
    pub pools: BTreeMap<PoolId, Pool>,
    pub overrides: OverrideRegistry,
    pub spend: SpendLedger,
    pub affinity: AffinityTable,
    pub counters: LedgerCounters,
    /// Answers to recent request ids (exactly-once writes; part of every snapshot).
    pub requests: RequestLog,
}

/// A pool whose `spent + holds` exceeds its limit without an operator having lowered it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("budget invariant broken for {pool:?}: committed {committed} > limit {limit}")]
pub struct InvariantViolation {
    pub pool: PoolId,
    pub committed: u64,
    pub limit: u64,
}

impl LedgerState {
    pub fn apply(&mut self, index: u64, ts_ms: u64, command: &Command) -> CommandResponse {
        self.now_ms = self.now_ms.max(ts_ms);
        self.last_index = self.last_index.max(index);
        self.advance_time();
        let now = self.now_ms;
        match command {
            Command::SetBudget {
                scope,
                spec,
                principal,
            } => self.set_budget(
                now,
                PoolId::Budget(scope.clone()),
                spec,
                principal,
                format!("budget {scope}"),
            ),
            Command::SetPeriodBudget {
                scope,
                spec,
                principal,
            } => {
                if spec.period_ms == 0 {
                    return rejected("a period budget needs a period");
                }
                self.set_budget(
                    now,
                    PoolId::Period(scope.clone(), spec.period_ms),
                    spec,
                    principal,
                    format!("budget {scope} per {} ms", spec.period_ms),
                )
            }
            Command::RemoveBudget { scope, principal } => {
                let before = self.pools.len();
                self.pools.retain(|id, _| match id {
                    PoolId::Budget(s) | PoolId::Period(s, _) => s != scope,
                    PoolId::Override(_) => true,
                });
                if self.pools.len() == before {
                    return rejected(&format!("no budget for {scope}"));
                }
                self.overrides.audit(
                    now,
                    principal,
                    AuditAction::BudgetRemoved,
                    format!("budget {scope}"),
                    String::new(),
                );
                CommandResponse::Done
            }
            Command::AcquireLease(req) => {
                let result = match self.pools.get_mut(&req.pool) {
                    Some(pool) => {
                        let before = pool.reclaimed_tokens;
                        let result = pool.grant(&req.pool, req, now);
                        self.counters.lease_tokens_reclaimed += pool.reclaimed_tokens - before;
                        result
                    }
                    None => Err(LeaseDenied::NoSuchPool),
                };
                match result {
                    Ok(_) => self.counters.lease_grants += 1,
                    Err(_) => self.counters.lease_denials += 1,
                }
                CommandResponse::Lease(result)
            }
            Command::ReleaseLease {
                node,
                pool,
                epoch,
                used_total,
            } => {
                if let Some(pool) = self.pools.get_mut(pool) {
                    let before = pool.reclaimed_tokens;
                    pool.release(*node, *epoch, *used_total);
                    self.counters.lease_tokens_reclaimed += pool.reclaimed_tokens - before;
                }
                self.drop_finished_override_pools();
                CommandResponse::Done
            }
            Command::ProposeOverride {
                scope,
                extra_tokens,
                reason,
                duration_ms,
                requester,
            } => match self.overrides.propose(
                now,
                scope.clone(),
                *extra_tokens,
                reason.clone(),
                *duration_ms,
                requester.clone(),
            ) {
                Ok(id) => CommandResponse::OverrideProposed { id },
                Err(reason) => CommandResponse::Rejected { reason },
            },
            Command::ApproveOverride { id, approver } => {
                match self.overrides.approve(now, *id, approver) {
                    Ok(activated) => {
                        let spec = BudgetSpec {
                            limit_tokens: activated.extra_tokens,
                            period_ms: 0,
                            rate_tokens_per_s: 0,
                            max_concurrency: 0,
                            max_debt_tokens: 0,
                            max_lease_tokens: (activated.extra_tokens / 4).max(1),
                        };
                        self.pools.insert(
                            PoolId::Override(activated.id),
                            Pool::new(spec, now, Some(activated.deadline_ms)),
                        );
                        CommandResponse::Done
                    }
                    Err(reason) => CommandResponse::Rejected { reason },
                }
            }
            Command::RevokeOverride {
                id,
                principal,
                reason,
            } => match self.overrides.revoke(now, *id, principal, reason) {
                Ok(()) => {
                    // Leases already handed out stay valid until they expire (the nodes are
                    // spending them); the pool only stops granting.
                    if let Some(pool) = self.pools.get_mut(&PoolId::Override(*id)) {
                        pool.closed = true;
                    }
                    self.drop_finished_override_pools();
                    CommandResponse::Done
                }
                Err(reason) => CommandResponse::Rejected { reason },
            },
            Command::ReportSpend(report) => {
                let accepted = self.spend.apply(report);
                if accepted {
                    self.counters.spend_batches_applied += 1;
                } else {
                    self.counters.spend_batches_duplicate += 1;
                }
                CommandResponse::Spend { accepted }
            }
            Command::RecordAffinity {
                prefix_key,
                prefix,
                worker,
                displaced,
                reason,
            } => {
                self.affinity.record(AffinityRecord {
                    prefix_key: *prefix_key,
                    prefix: prefix.clone(),
                    worker: worker.clone(),
                    displaced: displaced.clone(),
                    reason: reason.clone(),
                    at_ms: now,
                    log_index: index,
                });
                CommandResponse::Done
            }
            Command::SetAuditRetention { entries, principal } => {
                match self
                    .overrides
                    .change_audit_retention(now, *entries, principal)
                {
                    Ok(()) => CommandResponse::Done,
                    Err(reason) => CommandResponse::Rejected { reason },
                }
            }
            Command::ReclaimLease {
                node,
                pool,
                epoch,
                spent_at_most,
            } => {
                if let Some(pool) = self.pools.get_mut(pool) {
                    self.counters.lease_tokens_reclaimed +=
                        pool.reclaim(*node, *epoch, *spent_at_most);
                }
                self.drop_finished_override_pools();
                CommandResponse::Done
            }
            Command::Tick => CommandResponse::Done,
        }
    }

    fn set_budget(
        &mut self,
        now: u64,
        id: PoolId,
        spec: &BudgetSpec,
        principal: &str,
        target: String,
    ) -> CommandResponse {
        if spec.limit_tokens == 0 {
            return rejected("a budget needs a positive limit");
        }
        match self.pools.get_mut(&id) {
            Some(pool) => pool.set_spec(spec.clone()),
            None => {
                self.pools.insert(id, Pool::new(spec.clone(), now, None));
            }
        }
        self.overrides.audit(
            now,
            principal,
            AuditAction::BudgetSet,
            target,
            format!("{spec:?}"),
        );
        CommandResponse::Done
    }

    fn advance_time(&mut self) {
        let now = self.now_ms;
        self.overrides.advance(now);
        for pool in self.pools.values_mut() {
            let expired = pool.advance(now);
            self.counters.lease_expiries += expired.leases;
            self.counters.lease_tokens_charged_on_expiry += expired.tokens_charged;
        }
        self.drop_finished_override_pools();
    }

    /// A closed override pool with no lease left holds nothing and is forgotten.
    fn drop_finished_override_pools(&mut self) {
        self.pools.retain(|id, pool| {
            !(matches!(id, PoolId::Override(_)) && pool.closed && pool.leases.is_empty())
        });
    }

    /// Checks `spent + holds ≤ limit` for every pool.
    pub fn check_invariant(&self) -> Result<(), InvariantViolation> {
        for (id, pool) in &self.pools {
            if !pool.invariant_holds() {
                return Err(InvariantViolation {
                    pool: id.clone(),
                    committed: pool.committed(),
                    limit: pool.spec.limit_tokens,
                });
            }
        }
        Ok(())
    }
}

fn rejected(reason: &str) -> CommandResponse {
    CommandResponse::Rejected {
        reason: reason.to_owned(),
    }
}

impl LedgerState {
    /// Applies one log entry: a request id seen before is answered with its first outcome and
    /// changes nothing but ledger time; a new one applies and its answer is remembered.
    pub fn apply_request(&mut self, index: u64, request: &LedgerRequest) -> CommandResponse {
        if let Some(first) = request
            .request_id
            .and_then(|id| self.requests.answer(&id).cloned())
        {
            self.apply(index, request.ts_ms, &Command::Tick);
            self.counters.duplicate_requests += 1;
            self.requests.evict(self.now_ms);
            return first;
        }
        let response = self.apply(index, request.ts_ms, &request.command);
        if let Some(id) = request.request_id {
            self.requests
                .remember(id, index, request.ts_ms, response.clone());
        }
        self.requests.evict(self.now_ms);
        response
    }
}
