use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use super::diff::Change;

/// Who changed what, when and why — so that half a year later someone can tell why a
/// number is what it is. Refused attempts are recorded too.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct AuditEntry {
    pub at_unix_ms: u64,
    pub who: String,
    /// `api` or `config-file`.
    pub source: String,
    pub reason: Option<String>,
    pub changes: Vec<Change>,
    /// Why the change was refused; `None` when it was applied.
    pub error: Option<String>,
}

const KEEP_IN_MEMORY: usize = 1000;

/// The last entries in memory, and every entry appended to a JSON-lines file when one is
/// configured (`server.audit_log_path`).
pub struct AuditLog {
    entries: Mutex<VecDeque<AuditEntry>>,
    file: Option<PathBuf>,
}

impl AuditLog {
    pub fn in_memory() -> Self {
        Self {
            entries: Mutex::new(VecDeque::new()),
            file: None,
        }
    }

    pub fn with_file(path: Option<PathBuf>) -> Self {
        Self {
            entries: Mutex::new(VecDeque::new()),
            file: path,
        }
    }

    pub fn record(
        &self,
        who: &str,
        source: &str,
        reason: Option<&str>,
        changes: &[Change],
        error: Option<&str>,
    ) {
        let entry = AuditEntry {
            at_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or_default(),
            who: who.to_string(),
            source: source.to_string(),
            reason: reason.map(str::to_string),
            changes: changes.to_vec(),
            error: error.map(str::to_string),
        };
        if let Some(path) = &self.file {
            if let Err(e) = append_line(path, &entry) {
                tracing::error!(path = %path.display(), error = %e, "cannot write the config audit log");
            }
        }
        let mut entries = self.entries.lock();
        if entries.len() == KEEP_IN_MEMORY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    pub fn entries(&self) -> Vec<AuditEntry> {
        self.entries.lock().iter().cloned().collect()
    }
}

fn append_line(path: &PathBuf, entry: &AuditEntry) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(entry)?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(&line)?;
    file.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kept_and_appended_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let log = AuditLog::with_file(Some(path.clone()));
        log.record("alice", "api", Some("why"), &[], None);
        log.record("bob", "config-file", None, &[], Some("bad"));
        assert_eq!(log.entries().len(), 2);
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<AuditEntry> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].who, "bob");
        assert_eq!(lines[1].error.as_deref(), Some("bad"));
    }
}
