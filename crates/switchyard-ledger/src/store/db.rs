//! The database file, its tables, and the storage errors every store shares.

use redb::{Database, TableDefinition};
use std::path::Path;
use std::sync::Arc;

use crate::codec::CodecError;
use crate::raft_types::StorageError;

pub(crate) const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("raft_log");
pub(crate) const META: TableDefinition<&str, &[u8]> = TableDefinition::new("raft_meta");
pub(crate) const SNAPSHOT: TableDefinition<&str, &[u8]> = TableDefinition::new("snapshot");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create data dir {path}: {source}")]
    DataDir {
        path: String,
        source: std::io::Error,
    },
    /// Boxed: redb's errors are large and this travels through every storage call.
    #[error("redb: {0}")]
    Redb(Box<redb::Error>),
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error(
        "the data dir belongs to {field} {stored}, but this node is configured as {configured}; \
         point it at its own data dir (or an empty one for a new member)"
    )]
    Identity {
        field: &'static str,
        stored: String,
        configured: String,
    },
    #[error("blocking storage task failed: {0}")]
    Join(String),
}

macro_rules! from_redb {
    ($($error:ty),*) => {
        $(impl From<$error> for StoreError {
            fn from(error: $error) -> Self {
                StoreError::Redb(Box::new(error.into()))
            }
        })*
    };
}

from_redb!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError
);

impl StoreError {
    /// The file is still locked by another open handle (e.g. a stopping node in-process).
    pub fn is_already_open(&self) -> bool {
        matches!(self, StoreError::Redb(e) if matches!(**e, redb::Error::DatabaseAlreadyOpen))
    }
}

/// Opens (or creates) `<dir>/ledger.redb` and its tables.
pub fn open_database(dir: &Path) -> Result<Arc<Database>, StoreError> {
    std::fs::create_dir_all(dir).map_err(|source| StoreError::DataDir {
        path: dir.display().to_string(),
        source,
    })?;
    let db = Database::create(dir.join("ledger.redb"))?;
    let txn = db.begin_write()?;
    {
        txn.open_table(LOG)?;
        txn.open_table(META)?;
        txn.open_table(SNAPSHOT)?;
    }
    txn.commit()?;
    Ok(Arc::new(db))
}

pub(crate) fn read_err(e: impl std::fmt::Display) -> StorageError {
    openraft::StorageIOError::read(openraft::AnyError::error(e.to_string())).into()
}

pub(crate) fn write_err(e: impl std::fmt::Display) -> StorageError {
    openraft::StorageIOError::write(openraft::AnyError::error(e.to_string())).into()
}
