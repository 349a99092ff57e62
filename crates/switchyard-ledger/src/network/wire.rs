//! What every ledger RPC carries and how large it may be.

/// Largest snapshot chunk openraft sends in one `/raft/snapshot` call. Smaller than
/// [`MAX_RPC_BODY_BYTES`] with room for the request's framing, so a state of any size reaches
/// a lagging follower or a new learner chunk by chunk.
pub const SNAPSHOT_CHUNK_BYTES: u64 = 1024 * 1024;

/// Largest request body the Raft/ledger server reads. An append of up to openraft's
/// `max_payload_entries` entries, or one snapshot chunk plus framing, must fit; axum's implicit
/// 2 MiB would refuse openraft's default 3 MiB chunks and strand a follower forever.
pub const MAX_RPC_BODY_BYTES: usize = 32 * 1024 * 1024;
