//! The Raft log, vote and committed marker in redb.

use openraft::storage::{LogFlushed, RaftLogStorage};
use openraft::{Entry, LogState, OptionalSend, RaftLogReader, Vote};
use redb::{Database, Durability, ReadableTable};
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::db::{LOG, META, StoreError, read_err, write_err};
use crate::codec::{decode, encode};
use crate::raft_types::{LogId, StorageError, TypeConfig};

const VOTE: &str = "vote";
const COMMITTED: &str = "committed";
const LAST_PURGED: &str = "last_purged";

/// Log storage; cheap to clone (the log reader is a clone).
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Database>,
    committed_index: Arc<AtomicU64>,
}

impl LogStore {
    pub fn new(db: Arc<Database>) -> Self {
        Self {
            db,
            committed_index: Arc::new(AtomicU64::new(0)),
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

    /// Writes one meta key off the async runtime; `durable` waits for fsync.
    async fn write_meta(
        &self,
        key: &'static str,
        bytes: Vec<u8>,
        durable: bool,
    ) -> Result<(), StoreError> {
        let db = self.db.clone();
        blocking(move || {
            let mut txn = db.begin_write()?;
            if !durable {
                txn.set_durability(Durability::None);
            }
            {
                let mut table = txn.open_table(META)?;
                table.insert(key, bytes.as_slice())?;
            }
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

    /// Deletes log entries in `range` (one durable transaction).
    async fn delete_range(
        &self,
        range: (Bound<u64>, Bound<u64>),
        purged: Option<LogId>,
    ) -> Result<(), StoreError> {
        let db = self.db.clone();
        let purged = purged.map(|id| encode(&id)).transpose()?;
        blocking(move || {
            let txn = db.begin_write()?;
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
            txn.commit()?;
            Ok(())
        })
        .await
    }
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
        self.write_meta(VOTE, bytes, true).await.map_err(write_err)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        self.read_meta(VOTE).map_err(read_err)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        if let Some(id) = committed {
            self.committed_index.fetch_max(id.index, Ordering::Relaxed);
        }
        // Not fsynced on its own: losing it only means re-learning the commit point from the
        // leader; the next durable commit (append, vote) persists it anyway.
        let bytes = encode(&committed).map_err(write_err)?;
        self.write_meta(COMMITTED, bytes, false)
            .await
            .map_err(write_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
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
        let db = self.db.clone();
        let result = blocking(move || {
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(LOG)?;
                for (index, bytes) in &rows {
                    table.insert(*index, bytes.as_slice())?;
                }
            }
            txn.commit()?;
            Ok(())
        })
        .await;
        match result {
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
        self.delete_range((Bound::Included(log_id.index), Bound::Unbounded), None)
            .await
            .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        self.delete_range(
            (Bound::Unbounded, Bound::Included(log_id.index)),
            Some(log_id),
        )
        .await
        .map_err(write_err)
    }
}
