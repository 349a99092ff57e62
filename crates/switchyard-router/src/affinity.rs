//! Affinity events: every time cache-aware routing deviates from hash placement it says so,
//! so other gateway replicas can follow instead of rediscovering the move on their own.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AffinityReason {
    /// The worker holding the prefix was filtered out; the prefix now belongs to `worker`.
    Migration,
    /// Hash placement put a routing key past its ring owner because of the load bound.
    LoadMove,
}

impl AffinityReason {
    pub fn label(self) -> &'static str {
        match self {
            Self::Migration => "migration",
            Self::LoadMove => "load_move",
        }
    }
}

/// "Requests with routing key `prefix_key` (and prompts continuing `prefix`) belong to
/// `worker`." Workers are named, because ids are per process. Applying an event twice has the
/// same effect as applying it once.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
pub struct AffinityEvent {
    /// `stable_hash` of the request's routing key (session id, user, or the prompt's leading
    /// `routing_key.prompt_prefix_bytes`), or for a chat with a session or user the hash of
    /// its conversation (opening hashed under that key): the key placement and overrides use.
    /// Enough on its own to make a replica place the key where the emitter did.
    pub prefix_key: u64,
    /// Migration: the matched prompt prefix that moved (for a session: the conversation so
    /// far). LoadMove: the routing key when it is a prompt prefix, empty for a session or user.
    pub prefix: Arc<str>,
    /// The worker that now owns the prefix.
    pub worker: String,
    /// Workers that must stop being preferred for this prefix (the filtered holders), so a
    /// recovered old holder does not win it back.
    pub displaced: Vec<String>,
    pub reason: AffinityReason,
    /// Milliseconds since the Unix epoch, from the emitting replica's router clock.
    pub at_unix_ms: u64,
}

/// Where a policy sends its affinity events; provided by the gateway (later: the replicated
/// ledger). Called outside every policy lock, at most once per routing decision; it must not
/// block. It may call [`crate::RoutingPolicy::apply_affinity`] on the same policy.
pub trait AffinitySink: Send + Sync + 'static {
    fn publish(&self, event: AffinityEvent);
}

/// Drops events: for a single replica, whose policy already applied its own moves.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiscardAffinity;

impl AffinitySink for DiscardAffinity {
    fn publish(&self, event: AffinityEvent) {
        tracing::trace!(?event, "affinity event discarded");
    }
}

/// What [`crate::RoutingPolicy::apply_affinity`] did with an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AffinityApplied {
    Applied,
    /// The event names a worker this replica does not know; nothing changed.
    UnknownWorker,
    /// The policy keeps no affinity (everything but cache_aware).
    NotSupported,
}
