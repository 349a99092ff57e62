//! The override registry: temporary quota raises under the two-person rule, and the audit log
//! every operator change lands in. Approval opens a pool of `extra_tokens` that closes at the
//! deadline; there is no way to extend one (a new proposal is needed).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use switchyard_core::QuotaScope;

use crate::command::MAX_OVERRIDE_DURATION_MS;

/// How long a proposal waits for its second person before it lapses.
pub const PENDING_TTL_MS: u64 = 60 * 60 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OverrideStatus {
    Pending,
    Active,
    Expired,
    Revoked,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideRecord {
    pub id: u64,
    pub scope: QuotaScope,
    pub extra_tokens: u64,
    pub reason: String,
    pub duration_ms: u64,
    pub requester: String,
    pub approver: Option<String>,
    pub status: OverrideStatus,
    pub proposed_at_ms: u64,
    /// Pending: when the proposal lapses. Active: the deadline.
    pub until_ms: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuditAction {
    BudgetSet,
    BudgetRemoved,
    OverrideProposed,
    OverrideApproved,
    OverrideApprovalRefused,
    OverrideRevoked,
    OverrideExpired,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub seq: u64,
    pub at_ms: u64,
    pub principal: String,
    pub action: AuditAction,
    pub subject: String,
    pub detail: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideRegistry {
    next_id: u64,
    pub records: BTreeMap<u64, OverrideRecord>,
    pub audit: Vec<AuditEntry>,
}

/// What an approval opened, for the caller to create the matching pool.
pub struct Activated {
    pub id: u64,
    pub extra_tokens: u64,
    pub deadline_ms: u64,
}

fn same_principal(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

impl OverrideRegistry {
    pub fn audit(
        &mut self,
        at_ms: u64,
        principal: &str,
        action: AuditAction,
        subject: String,
        detail: String,
    ) {
        let seq = self.audit.len() as u64 + 1;
        self.audit.push(AuditEntry {
            seq,
            at_ms,
            principal: principal.to_owned(),
            action,
            subject,
            detail,
        });
    }

    pub fn propose(
        &mut self,
        now_ms: u64,
        scope: QuotaScope,
        extra_tokens: u64,
        reason: String,
        duration_ms: u64,
        requester: String,
    ) -> Result<u64, String> {
        if requester.trim().is_empty() {
            return Err("an override needs a named requester".into());
        }
        if extra_tokens == 0 {
            return Err("an override must add at least one token".into());
        }
        if duration_ms == 0 || duration_ms > MAX_OVERRIDE_DURATION_MS {
            return Err(format!(
                "override duration must be between 1 ms and {MAX_OVERRIDE_DURATION_MS} ms"
            ));
        }
        if reason.trim().is_empty() {
            return Err("an override needs a reason".into());
        }
        self.next_id += 1;
        let id = self.next_id;
        let detail = format!("+{extra_tokens} tokens for {duration_ms} ms: {reason}");
        self.records.insert(
            id,
            OverrideRecord {
                id,
                scope: scope.clone(),
                extra_tokens,
                reason,
                duration_ms,
                requester: requester.clone(),
                approver: None,
                status: OverrideStatus::Pending,
                proposed_at_ms: now_ms,
                until_ms: now_ms.saturating_add(PENDING_TTL_MS),
            },
        );
        self.audit(
            now_ms,
            &requester,
            AuditAction::OverrideProposed,
            format!("override {id} on {scope}"),
            detail,
        );
        Ok(id)
    }

    pub fn approve(&mut self, now_ms: u64, id: u64, approver: &str) -> Result<Activated, String> {
        let Some(record) = self.records.get_mut(&id) else {
            return Err(format!("override {id} does not exist"));
        };
        let refusal = if record.status != OverrideStatus::Pending {
            Some(format!(
                "override {id} is {:?}, only pending overrides can be approved (no renewal)",
                record.status
            ))
        } else if approver.trim().is_empty() {
            Some("an approval needs a named approver".to_owned())
        } else if same_principal(&record.requester, approver) {
            Some(format!(
                "two-person rule: `{approver}` proposed override {id} and cannot approve it"
            ))
        } else {
            None
        };
        if let Some(reason) = refusal {
            self.audit(
                now_ms,
                approver,
                AuditAction::OverrideApprovalRefused,
                format!("override {id}"),
                reason.clone(),
            );
            return Err(reason);
        }
        record.status = OverrideStatus::Active;
        record.approver = Some(approver.to_owned());
        record.until_ms = now_ms.saturating_add(record.duration_ms);
        let activated = Activated {
            id,
            extra_tokens: record.extra_tokens,
            deadline_ms: record.until_ms,
        };
        let subject = format!("override {id} on {}", record.scope);
        let detail = format!("active until {}", record.until_ms);
        self.audit(
            now_ms,
            approver,
            AuditAction::OverrideApproved,
            subject,
            detail,
        );
        Ok(activated)
    }

    pub fn revoke(
        &mut self,
        now_ms: u64,
        id: u64,
        principal: &str,
        reason: &str,
    ) -> Result<(), String> {
        let Some(record) = self.records.get_mut(&id) else {
            return Err(format!("override {id} does not exist"));
        };
        if !matches!(
            record.status,
            OverrideStatus::Pending | OverrideStatus::Active
        ) {
            return Err(format!("override {id} is already {:?}", record.status));
        }
        record.status = OverrideStatus::Revoked;
        let subject = format!("override {id} on {}", record.scope);
        self.audit(
            now_ms,
            principal,
            AuditAction::OverrideRevoked,
            subject,
            reason.to_owned(),
        );
        Ok(())
    }

    /// Expires overrides whose deadline (or pending window) has passed.
    pub fn advance(&mut self, now_ms: u64) {
        let due: Vec<(u64, OverrideStatus)> = self
            .records
            .values()
            .filter(|r| {
                matches!(r.status, OverrideStatus::Pending | OverrideStatus::Active)
                    && r.until_ms <= now_ms
            })
            .map(|r| (r.id, r.status))
            .collect();
        for (id, was) in due {
            let Some(record) = self.records.get_mut(&id) else {
                continue;
            };
            record.status = OverrideStatus::Expired;
            let subject = format!("override {id} on {}", record.scope);
            let detail = match was {
                OverrideStatus::Pending => "lapsed without approval".to_owned(),
                _ => "deadline reached".to_owned(),
            };
            self.audit(
                now_ms,
                "ledger",
                AuditAction::OverrideExpired,
                subject,
                detail,
            );
        }
    }

    pub fn active(&self) -> impl Iterator<Item = &OverrideRecord> {
        self.records
            .values()
            .filter(|r| r.status == OverrideStatus::Active)
    }
}
