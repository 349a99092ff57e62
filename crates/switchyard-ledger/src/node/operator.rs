//! The operator API of a node: budget and override changes, affinity records, and the
//! linearizable reads behind `GET /admin/quota` and the override listing. Writes go through
//! the leader from any node.

use std::time::Duration;
use switchyard_core::QuotaScope;
use tokio::sync::broadcast;

use super::LedgerNode;
use super::reads::{BudgetStatus, MinuteSplits, ReadAnswer, ReadQuery};
use crate::command::{BudgetSpec, Command, CommandResponse, WriteRequest};
use crate::error::LedgerError;
use crate::state::{
    AffinityRecord, AuditEntry, LedgerCounters, LedgerState, OverrideRecord, SpendRatios,
};

impl LedgerNode {
    // ---- writes ----

    /// Any command, through the leader.
    pub async fn write(&self, command: Command) -> Result<CommandResponse, LedgerError> {
        self.core().write(command).await
    }

    /// A command under the caller's own request id, proposed on this node (it must lead):
    /// a repeat of an id the ledger still remembers answers the first outcome and applies
    /// nothing. For writers that retry across processes; `write` picks fresh ids itself.
    pub async fn write_request(
        &self,
        request: WriteRequest,
    ) -> Result<CommandResponse, LedgerError> {
        let core = self.core();
        core.write_local(request, core.config.write_timeout).await
    }

    async fn write_done(&self, command: Command) -> Result<(), LedgerError> {
        match self.core().write(command).await? {
            CommandResponse::Rejected { reason } => Err(LedgerError::Rejected(reason)),
            _ => Ok(()),
        }
    }

    pub async fn set_budget(
        &self,
        scope: QuotaScope,
        spec: BudgetSpec,
        principal: &str,
    ) -> Result<(), LedgerError> {
        self.write_done(Command::SetBudget {
            scope,
            spec,
            principal: principal.to_owned(),
        })
        .await
    }

    pub async fn remove_budget(
        &self,
        scope: QuotaScope,
        principal: &str,
    ) -> Result<(), LedgerError> {
        self.write_done(Command::RemoveBudget {
            scope,
            principal: principal.to_owned(),
        })
        .await
    }

    /// Proposes an override; answers its id. Needs a different principal's approval.
    pub async fn propose_override(
        &self,
        scope: QuotaScope,
        extra_tokens: u64,
        reason: &str,
        duration: Duration,
        requester: &str,
    ) -> Result<u64, LedgerError> {
        let command = Command::ProposeOverride {
            scope,
            extra_tokens,
            reason: reason.to_owned(),
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            requester: requester.to_owned(),
        };
        match self.core().write(command).await? {
            CommandResponse::OverrideProposed { id } => Ok(id),
            CommandResponse::Rejected { reason } => Err(LedgerError::Rejected(reason)),
            other => Err(LedgerError::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    pub async fn approve_override(&self, id: u64, approver: &str) -> Result<(), LedgerError> {
        self.write_done(Command::ApproveOverride {
            id,
            approver: approver.to_owned(),
        })
        .await
    }

    pub async fn revoke_override(
        &self,
        id: u64,
        principal: &str,
        reason: &str,
    ) -> Result<(), LedgerError> {
        self.write_done(Command::RevokeOverride {
            id,
            principal: principal.to_owned(),
            reason: reason.to_owned(),
        })
        .await
    }

    /// Appends a prefix-affinity migration; every node's subscribers see it once applied.
    pub async fn record_affinity(
        &self,
        prefix_key: u64,
        prefix: &str,
        worker: &str,
        displaced: &[String],
        reason: &str,
    ) -> Result<(), LedgerError> {
        self.write_done(Command::RecordAffinity {
            prefix_key,
            prefix: prefix.to_owned(),
            worker: worker.to_owned(),
            displaced: displaced.to_vec(),
            reason: reason.to_owned(),
        })
        .await
    }

    /// Affinity records as this node applies them (replays after restart included).
    pub fn subscribe_affinity(&self) -> broadcast::Receiver<AffinityRecord> {
        self.core().affinity.subscribe()
    }

    /// All affinity records applied on this node (local, for a router starting up).
    pub fn affinity_records(&self) -> Vec<AffinityRecord> {
        self.affinity_records_where(|_| true)
    }

    /// The affinity records applied on this node that point at `worker`: what a router that
    /// has just learned of that worker must catch up on.
    pub fn affinity_records_naming(&self, worker: &str) -> Vec<AffinityRecord> {
        self.affinity_records_where(|record| record.worker == worker)
    }

    fn affinity_records_where(
        &self,
        keep: impl Fn(&AffinityRecord) -> bool,
    ) -> Vec<AffinityRecord> {
        self.core
            .state
            .read()
            .affinity
            .by_prefix
            .values()
            .filter(|record| keep(record))
            .cloned()
            .collect()
    }

    /// Runs `f` on the state this node has applied so far, without the linearizable read
    /// barrier: what this replica holds now, which may lag the leader. For comparing
    /// replicas (the chaos suite); operators want `read`.
    pub fn with_applied_state<T>(&self, f: impl FnOnce(&LedgerState) -> T) -> T {
        f(&self.core.state.read())
    }

    // ---- linearizable reads ----

    pub async fn read(&self, query: ReadQuery) -> Result<ReadAnswer, LedgerError> {
        self.core().read(query).await
    }

    pub async fn budgets(&self) -> Result<Vec<BudgetStatus>, LedgerError> {
        match self.read(ReadQuery::Budgets).await? {
            ReadAnswer::Budgets(b) => Ok(b),
            other => Err(LedgerError::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    pub async fn overrides(&self) -> Result<Vec<OverrideRecord>, LedgerError> {
        match self.read(ReadQuery::Overrides).await? {
            ReadAnswer::Overrides(o) => Ok(o),
            other => Err(LedgerError::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    pub async fn audit_log(&self, after_seq: u64) -> Result<Vec<AuditEntry>, LedgerError> {
        match self.read(ReadQuery::Audit { after_seq }).await? {
            ReadAnswer::Audit(a) => Ok(a),
            other => Err(LedgerError::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    pub async fn spend_splits(&self, from_minute: u64) -> Result<MinuteSplits, LedgerError> {
        match self.read(ReadQuery::Splits { from_minute }).await? {
            ReadAnswer::Splits(s) => Ok(s),
            other => Err(LedgerError::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    pub async fn spend_ratios(&self) -> Result<SpendRatios, LedgerError> {
        match self.read(ReadQuery::Ratios).await? {
            ReadAnswer::Ratios(r) => Ok(r),
            other => Err(LedgerError::UnexpectedAnswer(format!("{other:?}"))),
        }
    }

    pub async fn counters(&self) -> Result<LedgerCounters, LedgerError> {
        match self.read(ReadQuery::Counters).await? {
            ReadAnswer::Counters(c) => Ok(c),
            other => Err(LedgerError::UnexpectedAnswer(format!("{other:?}"))),
        }
    }
}
