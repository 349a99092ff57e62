use std::sync::Arc;
use switchyard_admission::Admission;
use switchyard_core::QuotaLedger;
use switchyard_ledger::LedgerNode;
use switchyard_router::RoutingPolicy;
use switchyard_workers::{HttpClient, Registry};

use crate::config::Config;
use crate::metrics::Metrics;
use crate::proxy::retry_budget::RetryBudget;
use crate::reload::LiveConfig;
use crate::warmup::WarmupRuntime;

/// Everything a request handler needs, shared by `Arc`. Nothing here takes a lock on the
/// request path: the worker set is an atomically swapped snapshot, loads are atomics.
pub struct AppState {
    pub live: Arc<LiveConfig>,
    pub registry: Registry,
    pub policy: Arc<dyn RoutingPolicy>,
    pub client: HttpClient,
    pub metrics: Arc<Metrics>,
    pub retry_budget: Arc<RetryBudget>,
    pub admission: Admission,
    /// The quota ledger admission spends from: the replicated ledger's local leases, or an
    /// in-memory one when `cluster.enabled = false`.
    pub ledger: Arc<dyn QuotaLedger>,
    /// This replica's Raft node, when clustering is on.
    pub cluster: Option<Arc<LedgerNode>>,
    /// `(principal, key)` pairs for `/admin/*`; empty disables the admin API.
    pub admin_keys: Vec<(String, String)>,
    /// Warmup manager, degradation controller and view, response cache (issue 7).
    pub warmup: WarmupRuntime,
    /// Request-body bytes held before admission, bounded by `listener.max_pending_body_bytes`.
    pub pending_bodies: Arc<crate::proxy::body_budget::BodyBudget>,
}

impl AppState {
    /// The configuration in force (it can change at run time; read it per request).
    pub fn config(&self) -> arc_swap::Guard<Arc<Config>> {
        self.live.get()
    }
}

pub type SharedState = Arc<AppState>;
