//! The degradation audit trail: forces, releases, drills and level failures, newest last,
//! bounded in memory and mirrored to the log (target `switchyard::audit`).

use serde::Serialize;
use std::collections::VecDeque;

use super::level::Level;
use crate::clock::UnixMillis;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AuditKind {
    Force,
    Release,
    Drill,
    LevelFailed,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    pub at_unix_ms: UnixMillis,
    pub kind: AuditKind,
    /// Who asked (`controller` for automatic level failures).
    pub by: String,
    pub from: Level,
    pub to: Level,
    pub reason: String,
    pub ok: bool,
}

pub(crate) struct AuditLog {
    capacity: usize,
    entries: VecDeque<AuditEntry>,
}

impl AuditLog {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: VecDeque::new(),
        }
    }

    pub(crate) fn record(&mut self, entry: AuditEntry) {
        tracing::info!(
            target: "switchyard::audit",
            kind = ?entry.kind,
            by = %entry.by,
            from = entry.from.as_u8(),
            to = entry.to.as_u8(),
            ok = entry.ok,
            reason = %entry.reason,
            "degradation audit"
        );
        while self.entries.len() >= self.capacity {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    pub(crate) fn entries(&self) -> Vec<AuditEntry> {
        self.entries.iter().cloned().collect()
    }
}
