//! The override registry: temporary quota raises under the two-person rule, and the audit log
//! every operator change lands in. Approval opens a pool of `extra_tokens` that closes at the
//! deadline; there is no way to extend one (a new proposal is needed).

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use switchyard_core::QuotaScope;

use crate::command::MAX_OVERRIDE_DURATION_MS;

/// How long a proposal waits for its second person before it lapses.
pub const PENDING_TTL_MS: u64 = 60 * 60 * 1000;

/// Audit entries kept by default; older ones are evicted on apply, the same way on every
/// replica, and sequence numbers keep counting across eviction.
pub const DEFAULT_AUDIT_RETENTION: u64 = 10_000;

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
    AuditRetentionSet,
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

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverrideRegistry {
    next_id: u64,
    pub records: BTreeMap<u64, OverrideRecord>,
    /// The newest `audit_retention` entries, oldest first.
    pub audit: VecDeque<AuditEntry>,
    /// Sequence number of the newest entry ever appended (retained or not).
    last_audit_seq: u64,
    audit_retention: u64,
}

impl Default for OverrideRegistry {
    fn default() -> Self {
        Self {
            next_id: 0,
            records: BTreeMap::new(),
            audit: VecDeque::new(),
            last_audit_seq: 0,
            audit_retention: DEFAULT_AUDIT_RETENTION,
        }
    }
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
        self.last_audit_seq += 1;
        self.audit.push_back(AuditEntry {
            seq: self.last_audit_seq,
            at_ms,
            principal: principal.to_owned(),
            action,
            subject,
            detail,
        });
        self.evict_audit();
    }

    /// Keeps at most `entries` audit entries (at least one), evicting the oldest now. Part of
    /// the replicated state: change it only while applying a log entry.
    pub fn set_audit_retention(&mut self, entries: u64) {
        self.audit_retention = entries.max(1);
        self.evict_audit();
    }

    /// The `SetAuditRetention` command: a new bound evicts down to it, then records who set
    /// it (that entry is inside the new bound). The bound already in force is a no-op, so a
    /// repeated proposal leaves the state as it was.
    pub fn change_audit_retention(
        &mut self,
        now_ms: u64,
        entries: u64,
        principal: &str,
    ) -> Result<(), String> {
        if entries == 0 {
            return Err("audit retention must keep at least one entry".into());
        }
        if entries == self.audit_retention {
            return Ok(());
        }
        let previous = self.audit_retention;
        self.set_audit_retention(entries);
        self.audit(
            now_ms,
            principal,
            AuditAction::AuditRetentionSet,
            "audit log".to_owned(),
            format!("retention {previous} -> {entries} entries"),
        );
        Ok(())
    }

    pub fn audit_retention(&self) -> u64 {
        self.audit_retention
    }

    /// The oldest entry still kept (`None` before the first); everything below was evicted.
    pub fn oldest_retained_seq(&self) -> Option<u64> {
        self.audit.front().map(|e| e.seq)
    }

    /// Entries ever appended, evicted or not.
    pub fn audit_appended(&self) -> u64 {
        self.last_audit_seq
    }

    fn evict_audit(&mut self) {
        let keep = usize::try_from(self.audit_retention).unwrap_or(usize::MAX);
        while self.audit.len() > keep {
            self.audit.pop_front();
        }
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
