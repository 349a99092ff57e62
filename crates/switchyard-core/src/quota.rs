use serde::{Deserialize, Serialize};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::tags::{Priority, Purpose};

/// What a budget applies to: one caller, or one caller's one purpose.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct QuotaScope {
    pub caller: Arc<str>,
    pub purpose: Option<Purpose>,
}

impl QuotaScope {
    pub fn caller(caller: impl Into<Arc<str>>) -> Self {
        Self {
            caller: caller.into(),
            purpose: None,
        }
    }
}

impl fmt::Display for QuotaScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.purpose {
            Some(purpose) => write!(f, "{}/{}", self.caller, purpose),
            None => write!(f, "{}", self.caller),
        }
    }
}

/// Who is spending, for the per-(caller, purpose, priority) spend split.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SpendTags {
    pub scope: QuotaScope,
    pub purpose: Purpose,
    pub priority: Priority,
}

/// Tokens held against a budget until the request's real usage is known.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a reservation must be settled, or its tokens stay held"]
pub struct Reservation {
    pub tags: SpendTags,
    pub tokens: u64,
    /// Spent under a temporary override (reported separately).
    pub under_override: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuotaError {
    /// The scope's period budget cannot cover the request.
    Exhausted {
        scope: QuotaScope,
        limit: u64,
        used: u64,
    },
    /// This replica's share of the scope's fleet-wide rate or concurrency limit is used up.
    /// Shares sum to the global limit across replicas, so this is the caller's own quota.
    FleetShare {
        scope: QuotaScope,
        limit: FleetLimit,
        /// The share in force here: tokens per second, or requests in flight.
        share: u64,
    },
    /// The ledger cannot vouch for the budget right now (e.g. no quorum and no lease left).
    Unavailable { reason: String },
}

/// Which fleet-wide limit a `QuotaError::FleetShare` refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FleetLimit {
    Rate,
    Concurrency,
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaError::Exhausted { scope, limit, used } => write!(
                f,
                "period token budget of `{scope}` is exhausted ({used} of {limit} used)"
            ),
            QuotaError::FleetShare {
                scope,
                limit: FleetLimit::Rate,
                share,
            } => write!(
                f,
                "fleet-wide rate limit of `{scope}` reached (this replica's share: {share} tokens/s)"
            ),
            QuotaError::FleetShare {
                scope,
                limit: FleetLimit::Concurrency,
                share,
            } => write!(
                f,
                "fleet-wide concurrency limit of `{scope}` reached (this replica's share: {share} in flight)"
            ),
            QuotaError::Unavailable { reason } => write!(f, "quota ledger unavailable: {reason}"),
        }
    }
}

impl std::error::Error for QuotaError {}

/// What `QuotaLedger::reserve_or_wait` answers.
pub type ReserveFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Reservation, QuotaError>> + Send + 'a>>;

/// The period budgets. The hot path calls `reserve` and `settle` on every request, so
/// implementations must answer from local state (atomics, a local lease) and never wait on
/// the network. In-memory now; the Raft-backed ledger implements the same trait.
pub trait QuotaLedger: Send + Sync + 'static {
    /// Holds `tokens` (an estimate) against the scope's period budget. Scopes without a
    /// configured budget always succeed.
    fn reserve(&self, tags: &SpendTags, tokens: u64) -> Result<Reservation, QuotaError>;

    /// `reserve` for the request path: when the answer depends on something already under way
    /// (a replicated ledger renewing the local lease this request asked for), waits for it,
    /// boundedly, instead of refusing a request the fleet still has budget for. Ledgers that
    /// answer from local state alone need not override it.
    fn reserve_or_wait<'a>(&'a self, tags: &'a SpendTags, tokens: u64) -> ReserveFuture<'a> {
        Box::pin(std::future::ready(self.reserve(tags, tokens)))
    }

    /// Replaces the reservation by the real token count (refund or bounded debt).
    fn settle(&self, reservation: Reservation, actual_tokens: u64);

    /// Used share of the scope's period budget, `(spent + reserved) / limit`, or `None` when the
    /// scope has no budget. Drives the soft (80 %) and hard (95 %) budget thresholds.
    fn water_level(&self, scope: &QuotaScope) -> Option<f64>;
}
