//! The gateway's shared handles: the request stack's, warmup's, and the state the HTTP
//! handlers read.

use std::sync::Arc;
use switchyard_admission::Admission;
use switchyard_core::QuotaLedger;
use switchyard_ledger::LedgerNode;
use switchyard_router::RoutingPolicy;
use switchyard_warmup::{DegradationController, ResponseCache, ViewReader, WarmupManager};
use switchyard_workers::{HttpClient, Registry};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::metrics::degradation::DegradationMetrics;
use crate::proxy::body_budget::BodyBudget;
use crate::proxy::retry_budget::RetryBudget;
use crate::reload::LiveConfig;
use crate::reload::current::CurrentConfig;
use crate::warmup::landings::Landings;

/// What a request uses from admission on — admission, the workers and the policy, the
/// upstream client, the retry budget, metrics and the config — shared by business requests
/// and the warmups sent through the same stack. Built before [`AppState`] so background
/// warmup holds these handles, not the state that owns it.
pub struct Stack {
    pub config: Arc<CurrentConfig>,
    pub registry: Registry,
    pub policy: Arc<dyn RoutingPolicy>,
    pub client: HttpClient,
    pub metrics: Arc<Metrics>,
    pub retry_budget: Arc<RetryBudget>,
    pub admission: Admission,
}

impl Stack {
    /// The configuration in force (it can change at run time; read it per request).
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.config.get()
    }
}

/// Warmup and degradation, as the request path and the admin API use them; cheap to clone.
#[derive(Clone)]
pub struct WarmupRuntime {
    pub manager: WarmupManager,
    pub controller: Arc<DegradationController>,
    /// The hot-path read of the level in force.
    pub view: ViewReader,
    pub cache: Arc<ResponseCache>,
    /// Where each resource's last warmup landed.
    pub landings: Arc<Landings>,
    pub(crate) metrics: Arc<DegradationMetrics>,
}

/// Everything a request handler needs, shared by `Arc`. Nothing here takes a lock on the
/// request path: the worker set is an atomically swapped snapshot, loads are atomics.
pub struct AppState {
    pub stack: Arc<Stack>,
    /// Run-time config changes: validated, published to `stack.config`, followed, audited.
    pub live: Arc<LiveConfig>,
    /// The quota ledger admission spends from: the replicated ledger's local leases, or an
    /// in-memory one when `cluster.enabled = false`.
    pub ledger: Arc<dyn QuotaLedger>,
    /// This replica's Raft node, when clustering is on.
    pub cluster: Option<Arc<LedgerNode>>,
    /// Digests of the `/admin/*` keys with their principals; empty disables the admin API.
    pub admin_keys: crate::admin_keys::AdminKeys,
    /// Warmup manager, degradation controller and view, response cache.
    pub warmup: WarmupRuntime,
    /// Request-body bytes held before admission, bounded by `listener.max_pending_body_bytes`.
    pub pending_bodies: Arc<BodyBudget>,
}

impl AppState {
    /// The configuration in force (it can change at run time; read it per request).
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.stack.config()
    }
}

pub type SharedState = Arc<AppState>;
