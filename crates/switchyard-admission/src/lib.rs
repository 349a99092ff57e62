//! Admission control for the Switchyard gateway, between request parsing and routing.
//!
//! - **Identity** (`Identity`): API key → caller; priority, purpose and client-retry count
//!   from headers, fixed as `RequestTags` at the first hop.
//! - **Gates** in series, cheapest first, per caller (and per caller purpose where
//!   configured): period budget through the `QuotaLedger` (soft 80 % sheds P2 and warmup,
//!   hard 95 % keeps only core P0), a token bucket (rate = quota × 0.9, capacity = rate ×
//!   1.5 s, settled against real usage), and an in-flight limit waiting at most 300 ms.
//! - **Priority queues**: when the gateway's dispatch slots are full, requests wait in
//!   per-class queues served by weighted fair queuing (P0 5 : P1 2 : P2 1, minimum shares
//!   40/15/5 %), round-robin across callers inside a class, with per-class timeouts.
//! - **Recovery-storm defence**: jittered exponential `Retry-After` whose exponent follows
//!   the client's own retries (not its caller's refusals); an overload detector that tells
//!   demand overload (the gateway's own queue refusals, workers healthy: shed at full
//!   capacity) from backend distress (filtered workers, failing requests), and only on
//!   distress (normal → overloaded → recovering → normal) pauses P2, cuts admission to 30 %
//!   and ramps it back 30 → 50 → 80 → 100 %, stepping back on an error rebound, keeping
//!   client retries to 20 % of admissions while recovering.
//!
//! `Admission` is the facade the gateway calls; `AdmissionSnapshot` feeds `/admin/admission`.

mod admission;
mod capacity;
mod config;
mod error;
mod gates;
mod identity;
mod ledger;
mod metrics;
mod overload;
mod permit;
mod refusal;
mod retry_after;
mod shared;
mod snapshot;
mod water;
mod wfq;

pub use config::{
    AdaptiveConfig, AdmissionConfig, AnonymousAccess, DetectorConfig, GatesConfig, IdentityConfig,
    PerClass, PurposeLimits, RampConfig, RetryAfterConfig, ScopeLimits, TenantConfig, WfqConfig,
};
pub use error::AdmissionError;
pub use identity::{ANONYMOUS, CallerLabels, Identity, IdentityError, OTHER, UNKNOWN};
pub use ledger::{BudgetPeriod, BudgetUsage, InMemoryLedger};
pub use overload::{GatewayState, OverloadSignals, Verdict};
pub use permit::AdmissionPermit;
pub use refusal::{Refusal, code, gate};
pub use retry_after::{MAX_STREAK_EXTRA, backoff, exponent, retry_after};
pub use shared::Admission;
pub use snapshot::{AdmissionSnapshot, PerClassCounts, ScopeSnapshot};
