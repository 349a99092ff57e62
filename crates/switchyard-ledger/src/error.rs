use serde::{Deserialize, Serialize};

use crate::codec::CodecError;
use crate::metrics::MetricsError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("no leader could be reached within the write timeout")]
    NoLeader,
    #[error("ledger unreachable: {0}")]
    Unreachable(String),
    #[error("raft: {0}")]
    Raft(String),
    #[error("rejected by the ledger: {0}")]
    Rejected(String),
    #[error("unexpected answer from the ledger: {0}")]
    UnexpectedAnswer(String),
    #[error("cannot bind the raft address {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
}

/// An error carried back over a forwarded call. `retry` says the operation was certainly not
/// applied (e.g. the callee is no longer leader), so the caller may try again.
#[derive(Clone, Debug, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct WireError {
    pub retry: bool,
    pub message: String,
}

impl From<&LedgerError> for WireError {
    fn from(error: &LedgerError) -> Self {
        Self {
            retry: matches!(error, LedgerError::NoLeader),
            message: error.to_string(),
        }
    }
}
