//! The state every handler shares, kept apart from the router so handlers and
//! the router both depend on it rather than on each other.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::openai::Endpoint;
use crate::engine::Engine;

/// State shared by every handler.
#[derive(Clone)]
pub(crate) struct AppState {
    pub(crate) engine: Arc<Engine>,
    response_ids: Arc<AtomicU64>,
}

impl AppState {
    /// Fresh state for one worker; response ids start at zero.
    pub(super) fn new(engine: Arc<Engine>) -> Self {
        Self {
            engine,
            response_ids: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(super) fn next_response_id(&self, endpoint: Endpoint) -> String {
        let n = self.response_ids.fetch_add(1, Ordering::Relaxed);
        let prefix = match endpoint {
            Endpoint::Chat => "chatcmpl",
            Endpoint::Completion => "cmpl",
        };
        format!("{prefix}-{}-{n}", self.engine.config.name)
    }
}
