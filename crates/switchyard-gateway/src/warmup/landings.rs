//! Where each resource's last warmup landed, and whether that was where business traffic
//! goes: what `GET /admin/warmup` shows next to the manager's report.

use parking_lot::Mutex;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};
use switchyard_warmup::{WarmupError, WarmupOutcome};

/// The last warmup of one resource, for `GET /admin/warmup`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Landing {
    pub at_unix_ms: u64,
    pub ok: bool,
    pub landed_on: Option<String>,
    pub business_reachable: Vec<String>,
    /// Landed on a worker business traffic does not reach (it warmed the wrong worker).
    pub misdirected: bool,
    pub tokens_spent: u64,
    pub error: Option<String>,
}

/// Last landing per resource name (bounded by the configured resources).
#[derive(Default)]
pub struct Landings(Mutex<BTreeMap<Arc<str>, Landing>>);

impl Landings {
    pub(crate) fn record(&self, name: &Arc<str>, outcome: &Result<WarmupOutcome, WarmupError>) {
        let at_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or_default();
        let landing = match outcome {
            Ok(outcome) => Landing {
                at_unix_ms,
                ok: true,
                landed_on: outcome.landed_on.clone(),
                business_reachable: outcome.business_reachable.clone(),
                misdirected: outcome.misdirected_to().is_some(),
                tokens_spent: outcome.tokens_spent,
                error: None,
            },
            Err(error) => Landing {
                at_unix_ms,
                ok: false,
                landed_on: None,
                business_reachable: Vec::new(),
                misdirected: false,
                tokens_spent: 0,
                error: Some(error.to_string()),
            },
        };
        self.0.lock().insert(Arc::clone(name), landing);
    }

    pub fn get(&self, name: &str) -> Option<Landing> {
        self.0.lock().get(name).cloned()
    }

    /// Landings of the resources still configured.
    pub fn snapshot(&self, configured: &[Arc<str>]) -> BTreeMap<Arc<str>, Landing> {
        let mut landings = self.0.lock();
        landings.retain(|name, _| configured.contains(name));
        landings.clone()
    }
}
