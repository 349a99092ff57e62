#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The replicated audit log is bounded: the newest N entries are kept, sequence numbers keep
//! counting across eviction, and eviction happens on apply so every replica (and every
//! snapshot) holds the same entries.

use switchyard_core::QuotaScope;
use switchyard_ledger::codec::{decode, encode};
use switchyard_ledger::state::{DEFAULT_AUDIT_RETENTION, LedgerState};
use switchyard_ledger::{AuditAction, BudgetSpec, Command, CommandResponse};

const RETENTION: u64 = 50;

/// A log of budget changes and override proposals/approvals (each appends audit entries).
fn log(len: u64) -> Vec<(u64, u64, Command)> {
    (0..len)
        .map(|i| {
            let command = match i % 3 {
                0 => Command::SetBudget {
                    scope: QuotaScope::caller(format!("c{}", i % 7)),
                    spec: BudgetSpec::daily(1_000 + i),
                    principal: "ops".into(),
                },
                1 => Command::ProposeOverride {
                    scope: QuotaScope::caller("c1"),
                    extra_tokens: 10,
                    reason: format!("r{i}"),
                    duration_ms: 60_000,
                    requester: "alice".into(),
                },
                // Approving an id that may or may not be pending: refusals are audited too.
                _ => Command::ApproveOverride {
                    id: i / 3,
                    approver: if i % 2 == 0 { "bob" } else { "alice" }.into(),
                },
            };
            (i + 1, 1_000_000 + i * 1_000, command)
        })
        .collect()
}

fn replica() -> LedgerState {
    let mut state = LedgerState::default();
    state.overrides.set_audit_retention(RETENTION);
    state
}

#[test]
fn the_audit_log_keeps_the_newest_entries_with_increasing_sequence_numbers() {
    assert_eq!(
        LedgerState::default().overrides.audit_retention(),
        DEFAULT_AUDIT_RETENTION
    );
    let mut state = replica();
    for (index, ts, command) in log(400) {
        state.apply(index, ts, &command);
        assert!(state.overrides.audit.len() as u64 <= RETENTION);
    }
    let appended = state.overrides.audit_appended();
    assert!(appended > 2 * RETENTION, "the log must overflow the bound");
    let seqs: Vec<u64> = state.overrides.audit.iter().map(|e| e.seq).collect();
    assert_eq!(seqs.len() as u64, RETENTION);
    let expected: Vec<u64> = (appended - RETENTION + 1..=appended).collect();
    assert_eq!(
        seqs, expected,
        "the newest entries, contiguous, oldest first"
    );
    assert_eq!(
        state.overrides.oldest_retained_seq(),
        Some(appended - RETENTION + 1)
    );
}

#[test]
fn replicas_and_snapshots_hold_the_same_audit_entries() {
    let entries = log(300);
    let mut a = replica();
    let mut b = replica();
    for (index, ts, command) in &entries {
        a.apply(*index, *ts, command);
        b.apply(*index, *ts, command);
    }
    assert_eq!(a, b, "same log, same state");

    // A replica that restored a snapshot half-way and replayed the rest ends up equal too,
    // and keeps numbering where the snapshot left off.
    let mut c = replica();
    for (index, ts, command) in &entries[..150] {
        c.apply(*index, *ts, command);
    }
    let mut restored: LedgerState = decode(&encode(&c).unwrap()).unwrap();
    assert_eq!(restored.overrides.audit_retention(), RETENTION);
    for (index, ts, command) in &entries[150..] {
        restored.apply(*index, *ts, command);
    }
    assert_eq!(restored, a);

    // Lowering the bound evicts at once, keeping the newest.
    let newest = a.overrides.audit_appended();
    a.overrides.set_audit_retention(5);
    assert_eq!(a.overrides.audit.len(), 5);
    assert_eq!(a.overrides.oldest_retained_seq(), Some(newest - 4));
}

fn set_retention(entries: u64, principal: &str) -> Command {
    Command::SetAuditRetention {
        entries,
        principal: principal.into(),
    }
}

/// A log where the retention changes twice (down, then up), is re-proposed unchanged (as
/// every gateway does at start-up), and one proposal is invalid.
fn log_with_retention_changes() -> Vec<(u64, u64, Command)> {
    let mut entries = log(300);
    let changes = [
        (100, set_retention(20, "config")),
        (101, set_retention(20, "config")),
        (180, set_retention(0, "config")),
        (200, set_retention(80, "ops")),
    ];
    for (position, command) in changes.into_iter().rev() {
        let (_, ts, _) = entries[position].clone();
        entries.insert(position, (0, ts, command));
    }
    for (i, entry) in entries.iter_mut().enumerate() {
        entry.0 = i as u64 + 1;
    }
    entries
}

#[test]
fn set_audit_retention_applies_the_same_on_every_replica_and_through_a_snapshot() {
    let entries = log_with_retention_changes();
    let mut a = replica();
    let mut b = replica();
    for (index, ts, command) in &entries {
        let answer = a.apply(*index, *ts, command);
        assert_eq!(answer, b.apply(*index, *ts, command));
        assert_eq!(a, b, "replicas diverged at index {index}");
        if let Command::SetAuditRetention { entries: 0, .. } = command {
            assert!(
                matches!(answer, CommandResponse::Rejected { .. }),
                "{answer:?}"
            );
        }
        assert!(a.overrides.audit.len() as u64 <= a.overrides.audit_retention());
    }
    assert_eq!(a.overrides.audit_retention(), 80);

    // Restoring a snapshot taken while the bound was 20 and replaying the rest ends equal.
    let cut = 150;
    let mut c = replica();
    for (index, ts, command) in &entries[..cut] {
        c.apply(*index, *ts, command);
    }
    assert_eq!(c.overrides.audit_retention(), 20);
    assert_eq!(c.overrides.audit.len(), 20);
    let mut restored: LedgerState = decode(&encode(&c).unwrap()).unwrap();
    assert_eq!(restored.overrides.audit_retention(), 20);
    for (index, ts, command) in &entries[cut..] {
        restored.apply(*index, *ts, command);
    }
    assert_eq!(restored, a);
}

#[test]
fn lowering_the_retention_evicts_at_once_and_audits_the_change_inside_the_new_bound() {
    let mut state = replica();
    for (index, ts, command) in log(200) {
        state.apply(index, ts, &command);
    }
    assert_eq!(state.overrides.audit.len() as u64, RETENTION);
    let before = state.overrides.audit_appended();

    // At the last entry's time, so no expiry is audited along with the change.
    let (_, last_ts, _) = log(200).pop().unwrap();
    let answer = state.apply(1_000, last_ts, &set_retention(10, "config"));
    assert_eq!(answer, CommandResponse::Done);
    assert_eq!(state.overrides.audit_retention(), 10);
    assert_eq!(state.overrides.audit.len(), 10);
    let newest = state.overrides.audit.back().unwrap();
    assert_eq!(newest.action, AuditAction::AuditRetentionSet);
    assert_eq!(newest.principal, "config");
    assert_eq!(newest.seq, before + 1);
    assert_eq!(newest.at_ms, last_ts);
    assert_eq!(state.overrides.oldest_retained_seq(), Some(before + 1 - 9));

    // The same value again is a no-op: no new entry, nothing evicted (start-up re-proposals).
    let unchanged = state.clone();
    let answer = state.apply(1_001, last_ts, &set_retention(10, "config"));
    assert_eq!(answer, CommandResponse::Done);
    assert_eq!(state.overrides, unchanged.overrides);

    // Zero would erase the log: refused, state unchanged.
    let answer = state.apply(1_002, last_ts, &set_retention(0, "config"));
    assert!(
        matches!(answer, CommandResponse::Rejected { .. }),
        "{answer:?}"
    );
    assert_eq!(state.overrides, unchanged.overrides);
}
