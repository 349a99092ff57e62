//! The Raft log, vote and committed marker in redb.
//!
//! openraft 0.9's core task awaits every append (and its flush callback) and every purge; the
//! vendored copy keeps a leader heartbeating meanwhile (`crates/third_party/openraft/PATCHES.md`). What
//! stays on the core's path is one redb transaction per call: appends are durable (fsync)
//! before their callback, the vote is durable before `save_vote` returns, a purge is not
//! synced on its own (the snapshot covering it already is; a purge lost in a crash only
//! leaves entries the snapshot makes redundant, and the next durable commit persists it), and
//! the committed marker rides along with the next log write instead of a transaction of its
//! own.

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{Entry, LogState, OptionalSend, RaftLogReader, Vote};
use parking_lot::Mutex;
use prometheus::Histogram;
use redb::{Database, Durability, ReadableTable, WriteTransaction};
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::db::{LOG, META, StoreError, read_err, write_err};
use super::flush_stall::FlushStall;
use crate::codec::{decode, encode};
use crate::raft_types::{LogId, StorageError, TypeConfig};

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const LAST_PURGED: &str = "last_purged";

/// How long appends take to become durable, and how many entries each carries.
pub struct LogFlushStats {
    seconds: Histogram,
    entries: Histogram,
}

impl LogFlushStats {
    pub fn new(seconds: Histogram, entries: Histogram) -> Self {
        Self { seconds, entries }
    }
}

/// Log storage; cheap to clone (the log reader is a clone).
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Database>,
    committed_index: Arc<AtomicU64>,
    /// The committed marker openraft saved last, not yet written: it goes into the next log
    /// write's transaction (losing it only means re-learning the commit point).
    pending_committed: Arc<Mutex<Option<Vec<u8>>>>,
    flush: Arc<LogFlushStats>,
    /// Test-only: a stall before each durable append (off in production).
    stall: Arc<FlushStall>,
}

impl LogStore {
    pub fn new(db: Arc<Database>, flush: Arc<LogFlushStats>, stall: Arc<FlushStall>) -> Self {
        Self {
            db,
            committed_index: Arc::new(AtomicU64::new(0)),
            pending_committed: Arc::new(Mutex::new(None)),
            flush,
            stall,
        }
    }

    /// Highest index openraft reported as committed (for the commit-index gauge).
    pub fn committed_index(&self) -> Arc<AtomicU64> {
        self.committed_index.clone()
    }

    fn read_meta<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, StoreError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(META)?;
        let Some(value) = table.get(key)? else {
            return Ok(None);
        };
        Ok(Some(decode(value.value())?))
    }

    /// Writes one meta key durably (fsync) off the async runtime.
    async fn write_meta_durably(
        &self,
        key: &'static str,
        bytes: Vec<u8>,
    ) -> Result<(), StoreError> {
        let db = self.db.clone();
        let committed = self.pending_committed.lock().take();
        blocking(move || {
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(META)?;
                table.insert(key, bytes.as_slice())?;
            }
            write_committed(&txn, committed)?;
            txn.commit()?;
            Ok(())
        })
        .await
    }

    fn last_entry_log_id(&self) -> Result<Option<LogId>, StoreError> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(LOG)?;
        let Some((_, value)) = table.last()? else {
            return Ok(None);
        };
        let entry: Entry<TypeConfig> = decode(value.value())?;
        Ok(Some(entry.log_id))
    }

    /// Deletes log entries in `range` in one transaction, durable (fsync) or not.
    async fn delete_range(
        &self,
        range: (Bound<u64>, Bound<u64>),
        purged: Option<LogId>,
        durability: Durability,
    ) -> Result<(), StoreError> {
        let db = self.db.clone();
        let purged = purged.map(|id| encode(&id)).transpose()?;
        let committed = self.pending_committed.lock().take();
        blocking(move || {
            let mut txn = db.begin_write()?;
            txn.set_durability(durability);
            {
                let mut table = txn.open_table(LOG)?;
                let keys: Vec<u64> = table
                    .range::<u64>(range)?
                    .map(|item| item.map(|(k, _)| k.value()))
                    .collect::<Result<_, _>>()?;
                for key in keys {
                    table.remove(key)?;
                }
                if let Some(purged) = purged {
                    let mut meta = txn.open_table(META)?;
                    meta.insert(LAST_PURGED, purged.as_slice())?;
                }
            }
            write_committed(&txn, committed)?;
            txn.commit()?;
            Ok(())
        })
        .await
    }

    /// Writes `rows` in one durable transaction (with the pending committed marker); a
    /// test-only stall set when the flush starts sleeps first. Observed as one flush.
    async fn append_durably(&self, rows: Vec<(u64, Vec<u8>)>) -> Result<(), StoreError> {
        let db = self.db.clone();
        let committed = self.pending_committed.lock().take();
        let flush = self.flush.clone();
        let stall = self.stall.clone();
        blocking(move || {
            let started = Instant::now();
            let stall = stall.stall_now();
            if !stall.is_zero() {
                std::thread::sleep(stall);
            }
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(LOG)?;
                for (index, bytes) in &rows {
                    table.insert(*index, bytes.as_slice())?;
                }
            }
            write_committed(&txn, committed)?;
            txn.commit()?;
            flush.seconds.observe(started.elapsed().as_secs_f64());
            flush.entries.observe(rows.len() as f64);
            Ok(())
        })
        .await
    }
}

/// Adds the committed marker openraft saved last (if any) to a log write's transaction.
fn write_committed(txn: &WriteTransaction, committed: Option<Vec<u8>>) -> Result<(), StoreError> {
    if let Some(bytes) = committed {
        let mut meta = txn.open_table(META)?;
        meta.insert(COMMITTED, bytes.as_slice())?;
    }
    Ok(())
}

/// Runs a redb write on the blocking pool: a durable commit is an fsync.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError::Join(e.to_string()))?
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError> {
        let bounds = (range.start_bound().cloned(), range.end_bound().cloned());
        let read = || -> Result<Vec<Entry<TypeConfig>>, StoreError> {
            let txn = self.db.begin_read()?;
            let table = txn.open_table(LOG)?;
            let mut entries = Vec::new();
            for item in table.range::<u64>(bounds)? {
                let (_, value) = item?;
                entries.push(decode(value.value())?);
            }
            Ok(entries)
        };
        read().map_err(read_err)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let last_purged: Option<LogId> = self.read_meta(LAST_PURGED).map_err(read_err)?;
        let last = self.last_entry_log_id().map_err(read_err)?.or(last_purged);
        Ok(LogState {
            last_purged_log_id: last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        let bytes = encode(vote).map_err(write_err)?;
        self.write_meta_durably(VOTE, bytes)
            .await
            .map_err(write_err)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        self.read_meta(VOTE).map_err(read_err)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        if let Some(id) = committed {
            self.committed_index.fetch_max(id.index, Ordering::Relaxed);
        }
        // No transaction of its own (it would wait for redb's write lock behind a flush):
        // kept until the next log write, which persists it. Losing it only means re-learning
        // the commit point from the leader.
        let bytes = encode(&committed).map_err(write_err)?;
        *self.pending_committed.lock() = Some(bytes);
        Ok(())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        if let Some(bytes) = self.pending_committed.lock().as_ref() {
            let committed: Option<LogId> = decode(bytes).map_err(read_err)?;
            return Ok(committed);
        }
        let committed: Option<Option<LogId>> = self.read_meta(COMMITTED).map_err(read_err)?;
        Ok(committed.flatten())
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut rows = Vec::new();
        for entry in entries {
            rows.push((entry.log_id.index, encode(&entry).map_err(write_err)?));
        }
        // The callback fires only after the durable commit returned.
        match self.append_durably(rows).await {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(write_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.delete_range(
            (Bound::Included(log_id.index), Bound::Unbounded),
            None,
            Durability::Immediate,
        )
        .await
        .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.delete_range(
            (Bound::Unbounded, Bound::Included(log_id.index)),
            Some(log_id),
            Durability::None,
        )
        .await
        .map_err(write_err)
    }
}

#[cfg(test)]
#[path = "log_store_tests.rs"]
mod tests;
