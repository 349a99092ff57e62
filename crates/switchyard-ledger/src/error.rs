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
    /// A write was sent but no answer came before the write timeout: it may have applied
    /// (a retry with the same request id would answer its outcome) or not.
    #[error("outcome unknown: the write may or may not have applied ({0})")]
    OutcomeUnknown(String),
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
    #[error("spend journal {path}: {source}")]
    Journal {
        path: String,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Codec(#[from] CodecError),
    #[error(transparent)]
    Metrics(#[from] MetricsError),
}

impl LedgerError {
    /// The ledger could not be reached in time (no leader, no quorum, lost in flight): the
    /// caller should back off and try again, unlike a refusal or a local fault.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            LedgerError::NoLeader
                | LedgerError::Unreachable(_)
                | LedgerError::OutcomeUnknown(_)
                | LedgerError::Raft(_)
        )
    }
}

/// An error carried back over a forwarded call. `retry` says the caller may send the same
/// request again (same request id for a write, so the ledger applies it at most once): the
/// callee was not leader, or could not commit in time.
#[derive(Clone, Debug, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct WireError {
    pub retry: bool,
    /// The callee proposed the write but could not see it commit in time.
    pub maybe_applied: bool,
    pub message: String,
}

impl From<&LedgerError> for WireError {
    fn from(error: &LedgerError) -> Self {
        Self {
            retry: matches!(
                error,
                LedgerError::NoLeader
                    | LedgerError::Unreachable(_)
                    | LedgerError::OutcomeUnknown(_)
            ),
            maybe_applied: matches!(
                error,
                LedgerError::Unreachable(_) | LedgerError::OutcomeUnknown(_)
            ),
            message: error.to_string(),
        }
    }
}
