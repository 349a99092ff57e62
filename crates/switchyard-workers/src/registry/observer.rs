//! The hook through which routing structures follow membership; the registry actor calls it.

use std::sync::Arc;

use crate::handle::WorkerHandle;

/// Told about membership changes, synchronously from the registry actor, so routing
/// structures forget a removed worker before the next snapshot is read.
pub trait RegistryObserver: Send + Sync + 'static {
    fn worker_added(&self, worker: &Arc<WorkerHandle>);
    fn worker_removed(&self, worker: &Arc<WorkerHandle>);
}
