//! The configuration in force: read lock-free on the request path, replaced whole by
//! [`super::LiveConfig`] when a change is applied. Built first, so whatever reads it can be
//! built before whatever must follow its changes.

use arc_swap::ArcSwap;
use std::sync::Arc;

use crate::config::Config;

pub struct CurrentConfig(ArcSwap<Config>);

impl CurrentConfig {
    pub fn new(config: Config) -> Self {
        Self(ArcSwap::from_pointee(config))
    }

    /// The config in force; cheap, lock-free, safe on the request path.
    pub fn get(&self) -> arc_swap::Guard<Arc<Config>> {
        self.0.load()
    }

    pub(super) fn load_full(&self) -> Arc<Config> {
        self.0.load_full()
    }

    pub(super) fn store(&self, config: Arc<Config>) {
        self.0.store(config);
    }
}
