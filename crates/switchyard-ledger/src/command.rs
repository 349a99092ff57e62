//! What can be written to the ledger, and what applying it answers. Every type here is part of
//! the replicated log's wire format (bincode), so changing a variant changes the log format.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use switchyard_core::{Priority, Purpose, QuotaScope};

/// Raft node id of a gateway replica.
pub type NodeId = u64;

/// Longest override an operator can grant: 2 h, no renewal, so an emergency grant cannot
/// quietly become a standing budget.
pub const MAX_OVERRIDE_DURATION_MS: u64 = 2 * 60 * 60 * 1000;

/// Longest lease the state machine hands out, whatever a node asks for: it bounds how long a
/// crashed node's unspent slice stays held.
pub const MAX_LEASE_TTL_MS: u64 = 60_000;

/// A share value meaning "the budget sets no such limit".
pub const UNLIMITED_SHARE: u64 = u64::MAX;

/// A budget is drawn down through leases; an approved override is a second, temporary pool.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PoolId {
    Budget(QuotaScope),
    Override(u64),
    /// A second period limit of a budgeted scope (a month limit next to a day limit), keyed
    /// by its period length in ms. Every request of the scope spends from both. New variants
    /// go last (bincode numbers them by position).
    Period(QuotaScope, u64),
}

/// A scope's period budget as the operator sets it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetSpec {
    /// Tokens per period.
    pub limit_tokens: u64,
    /// Period length; spend resets at each multiple of it (entry time, ms since the Unix epoch).
    pub period_ms: u64,
    /// Token rate for the whole fleet (0 = not limited); leases carry a demand-weighted share.
    pub rate_tokens_per_s: u64,
    /// Concurrent requests for the whole fleet (0 = not limited); leases carry a share.
    pub max_concurrency: u64,
    /// How far one lease may overshoot through settlement (real count above the estimate).
    /// Held against the budget with the lease so the overshoot stays inside the limit.
    pub max_debt_tokens: u64,
    /// Most tokens one node may hold unspent at once (0 = no cap). Bounds what a crashed
    /// node takes with it: its hold is charged in full when its lease expires.
    pub max_lease_tokens: u64,
}

impl BudgetSpec {
    /// A daily budget: debt allowance 1 % of the limit, one node holds at most 10 % of it
    /// unspent, no rate or concurrency caps.
    pub fn daily(limit_tokens: u64) -> Self {
        Self {
            limit_tokens,
            period_ms: 24 * 60 * 60 * 1000,
            rate_tokens_per_s: 0,
            max_concurrency: 0,
            max_debt_tokens: limit_tokens / 100,
            max_lease_tokens: (limit_tokens / 10).max(1),
        }
    }
}

/// A node's request for (more of) a pool. `used_total` and `cap_total` are cumulative over the
/// lease epoch: the node lowers its own spendable total to `cap_total` before sending, so the
/// ledger may reclaim everything above it without racing the node's hot path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRequest {
    pub node: NodeId,
    pub pool: PoolId,
    /// The epoch the node holds, if any.
    pub epoch: Option<u64>,
    pub used_total: u64,
    pub cap_total: u64,
    /// Tokens the node expects to need before the next renewal.
    pub demand: u64,
    pub ttl_ms: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGrant {
    pub pool: PoolId,
    /// Fencing token: a new epoch means the node's previous lease is gone (fully charged).
    pub epoch: u64,
    /// Cumulative tokens the node may spend under this epoch.
    pub granted_total: u64,
    pub max_debt_tokens: u64,
    /// Ledger time at which the ledger stops counting this lease (the node stops earlier).
    pub expires_at_ms: u64,
    /// Time from the grant to `expires_at_ms`: the node's local deadline is its send time
    /// plus this, minus its safety margin.
    pub ttl_ms: u64,
    pub rate_share_per_s: u64,
    pub concurrency_share: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeaseDenied {
    NoSuchPool,
    PoolClosed,
    Exhausted { limit: u64, committed: u64 },
}

/// One row of a spend batch.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SplitKey {
    pub caller: Arc<str>,
    pub purpose: Purpose,
    pub priority: Priority,
    pub under_override: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendTotals {
    pub tokens: u64,
    pub requests: u64,
}

impl SpendTotals {
    pub fn add(&mut self, other: SpendTotals) {
        self.tokens = self.tokens.saturating_add(other.tokens);
        self.requests = self.requests.saturating_add(other.requests);
    }
}

/// A node's batch of spend, idempotent by `(node, boot_id, seq)`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendReport {
    pub node: NodeId,
    /// Distinguishes process lifetimes so a restarted node's sequence numbers stay fresh.
    pub boot_id: u64,
    pub seq: u64,
    /// Minute (since the Unix epoch, node clock) the batch belongs to.
    pub minute: u64,
    pub lines: Vec<(SplitKey, SpendTotals)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    SetBudget {
        scope: QuotaScope,
        spec: BudgetSpec,
        principal: String,
    },
    RemoveBudget {
        scope: QuotaScope,
        principal: String,
    },
    AcquireLease(LeaseRequest),
    ReleaseLease {
        node: NodeId,
        pool: PoolId,
        epoch: u64,
        used_total: u64,
    },
    ProposeOverride {
        scope: QuotaScope,
        extra_tokens: u64,
        reason: String,
        duration_ms: u64,
        requester: String,
    },
    ApproveOverride {
        id: u64,
        approver: String,
    },
    RevokeOverride {
        id: u64,
        principal: String,
        reason: String,
    },
    ReportSpend(SpendReport),
    RecordAffinity {
        prefix_key: u64,
        /// The prefix text (bounded by the proposer), so other routers can rewrite their
        /// prefix trees, not only their placement.
        prefix: String,
        worker: String,
        /// Workers the prefix moved away from.
        displaced: Vec<String>,
        reason: String,
    },
    /// Moves ledger time forward (expiries) without changing anything else; the leader's
    /// blank entries and heartbeats carry no time, so a quiet cluster proposes this.
    Tick,
    // New variants go last: bincode numbers variants by position, so inserting one would
    // change the meaning of entries already in a log.
    /// Keeps at most `entries` (> 0) audit entries from now on, evicting the oldest at once.
    /// Setting the value already in force changes nothing (no audit entry either), so a
    /// leader may propose its configured value on every term it starts.
    SetAuditRetention {
        entries: u64,
        principal: String,
    },
    /// Sets (or changes) a scope's limit over a second period, `spec.period_ms` long; the
    /// scope's `RemoveBudget` removes it too.
    SetPeriodBudget {
        scope: QuotaScope,
        spec: BudgetSpec,
        principal: String,
    },
    /// A restarted node's word on a lease its previous process held: under `epoch` it let
    /// through at most `spent_at_most` tokens of reservations (its spend journal's durable
    /// ceiling; settlement may add the debt allowance). A live lease of that epoch is
    /// released at that count; an expired or fenced one, already charged in full, gets the
    /// rest back.
    ReclaimLease {
        node: NodeId,
        pool: PoolId,
        epoch: u64,
        spent_at_most: u64,
    },
}

/// Names one client write across all its attempts (local, forwarded, retried), so the state
/// machine applies it at most once and answers a repeat with the first outcome. Unique per
/// writer process: `origin` is the writer (node id, or a random value for tools), `boot`
/// tells its process lifetimes apart, `seq` counts its writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RequestId {
    pub origin: u64,
    pub boot: u64,
    pub seq: u64,
}

/// What a writer hands the leader (forwarded over `/ledger/write`): the command and the id
/// that makes its retries safe. `Tick` and other writes whose repeat is harmless may go
/// without an id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteRequest {
    pub id: Option<RequestId>,
    pub command: Command,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandResponse {
    Done,
    Lease(Result<LeaseGrant, LeaseDenied>),
    OverrideProposed { id: u64 },
    Spend { accepted: bool },
    Rejected { reason: String },
}

/// The log entry payload: a command stamped with ledger time by the proposing leader (its wall
/// clock read once per term, then its monotonic clock: `node/ledger_time.rs`), and the
/// writer's request id when it has one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerRequest {
    pub ts_ms: u64,
    pub request_id: Option<RequestId>,
    pub command: Command,
}

impl std::fmt::Display for LedgerRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}@{}", self.command, self.ts_ms)?;
        if let Some(id) = &self.request_id {
            write!(f, "#{}/{}/{}", id.origin, id.boot, id.seq)?;
        }
        Ok(())
    }
}
