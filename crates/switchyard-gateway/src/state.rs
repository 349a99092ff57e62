use std::sync::Arc;
use switchyard_router::RoutingPolicy;
use switchyard_workers::{HttpClient, Registry};

use crate::config::Config;
use crate::metrics::Metrics;

/// Everything a request handler needs, shared by `Arc`. Nothing here takes a lock on the
/// request path: the worker set is an atomically swapped snapshot, loads are atomics.
pub struct AppState {
    pub config: Config,
    pub registry: Registry,
    pub policy: Arc<dyn RoutingPolicy>,
    pub client: HttpClient,
    pub metrics: Arc<Metrics>,
    /// `None` disables the admin API.
    pub admin_key: Option<String>,
}

pub type SharedState = Arc<AppState>;
