use arc_swap::{ArcSwap, Guard};
use std::sync::Arc;

use crate::handle::WorkerHandle;

/// The published set of registered workers. Written only by the registry actor (copy on
/// write, a handful of times a day); read lock-free by every request.
#[derive(Debug, Default)]
pub struct WorkerDirectory {
    workers: ArcSwap<Vec<Arc<WorkerHandle>>>,
}

impl WorkerDirectory {
    pub fn snapshot(&self) -> Guard<Arc<Vec<Arc<WorkerHandle>>>> {
        self.workers.load()
    }

    pub fn find(&self, name: &str) -> Option<Arc<WorkerHandle>> {
        self.workers
            .load()
            .iter()
            .find(|w| w.name() == name)
            .cloned()
    }

    pub(crate) fn publish(&self, workers: Vec<Arc<WorkerHandle>>) {
        self.workers.store(Arc::new(workers));
    }
}
