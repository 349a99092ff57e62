//! The spend journal: what makes a replica's leases crash-safe. Before the hot path lets a
//! lease's spend pass a ceiling, that ceiling is appended to a file in the data dir and
//! synced (`file.rs`); the writer task (`writer.rs`) raises ceilings a step ahead of the
//! spend, a quarter of the fresh grant, batching every lease due into one sync. After a crash
//! the restarted process reads the journal and reports each lease of its previous life at
//! its ceiling (`reclaim.rs`), and the ledger gives back the rest of what it charged.
//!
//! Worst case: a replica that never comes back keeps its last leases charged in full (at
//! most `LeaseConfig::spend_window` plus `latency_cover` recent renewal latencies — in all at
//! most `ttl − safety_margin` — of its spend, × headroom, plus the debt allowance); one that
//! restarts strands at most a journal step plus the debt allowance per lease. A step is the
//! largest of a quarter of the fresh grant, four of the largest requests, and the spend
//! during `latency_cover` recent journal syncs, never more than the fresh grant: a slow disk
//! widens what a restart strands, up to the whole fresh grant. Neither lets the fleet spend
//! more than the budget: the ceiling is on disk before the spend it covers.

mod file;
pub(crate) mod reclaim;
pub(crate) mod writer;

pub use file::{Ceilings, JOURNAL_FILE, JournalFile, Record};

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::LedgerError;
use crate::store::FlushStall;

pub struct SpendJournal {
    path: PathBuf,
    file: Arc<Mutex<JournalFile>>,
    /// Test-only slow disk: every sync starting inside its window sleeps first.
    stall: Arc<FlushStall>,
}

impl SpendJournal {
    /// Opens the journal in `dir`; answers it and the open epochs a previous process left.
    pub fn open(dir: &Path, stall: Arc<FlushStall>) -> Result<(Self, Ceilings), LedgerError> {
        let path = dir.join(JOURNAL_FILE);
        let (file, recovered) = JournalFile::open(dir).map_err(|source| LedgerError::Journal {
            path: path.display().to_string(),
            source,
        })?;
        Ok((
            Self {
                path,
                file: Arc::new(Mutex::new(file)),
                stall,
            },
            recovered,
        ))
    }

    /// Appends and syncs `records` on a blocking thread; they count once this returns `Ok`.
    pub async fn append(&self, records: Vec<Record>) -> Result<(), LedgerError> {
        let stall = self.stall.stall_now();
        if !stall.is_zero() {
            tokio::time::sleep(stall).await;
        }
        let file = self.file.clone();
        let written = tokio::task::spawn_blocking(move || file.lock().append(&records)).await;
        let result = match written {
            Ok(result) => result,
            Err(join) => Err(std::io::Error::other(join.to_string())),
        };
        result.map_err(|source| LedgerError::Journal {
            path: self.path.display().to_string(),
            source,
        })
    }
}
