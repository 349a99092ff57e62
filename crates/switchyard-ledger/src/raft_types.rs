//! The openraft type configuration of the ledger group.

use crate::command::{CommandResponse, LedgerRequest};
use std::io::Cursor;

openraft::declare_raft_types!(
    /// Raft types of the ledger: entries carry a [`LedgerRequest`], applying one answers a
    /// [`CommandResponse`]; nodes are `u64` ids with an HTTP address (`BasicNode`).
    pub TypeConfig:
        D = LedgerRequest,
        R = CommandResponse,
);

pub type LedgerRaft = openraft::Raft<TypeConfig>;
pub type RaftNode = openraft::BasicNode;
pub type LogId = openraft::LogId<u64>;
pub type StorageError = openraft::StorageError<u64>;
