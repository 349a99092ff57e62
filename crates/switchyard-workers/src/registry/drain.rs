//! A drain as its caller sees it: the handle to wait on and how it ended. The registry actor
//! starts drains and reports their end; the registry's front hands them out.

use std::sync::Arc;
use tokio::sync::watch;

use crate::handle::WorkerHandle;

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainOutcome {
    /// Every in-flight request finished; the worker was removed.
    Idle,
    /// `drain.timeout_ms` passed; the worker was removed with these still running (they keep
    /// their handle and end on their own).
    TimedOut { in_flight: u64 },
    /// The worker was removed some other way, or the registry stopped.
    Interrupted,
}

/// A drain in progress; the worker is already out of the candidate set.
#[derive(Debug)]
pub struct Drain {
    // Built only by the registry actor, which owns the sending side of `done`.
    pub(super) worker: Arc<WorkerHandle>,
    pub(super) done: watch::Receiver<Option<DrainOutcome>>,
}

impl Drain {
    pub fn worker(&self) -> &Arc<WorkerHandle> {
        &self.worker
    }

    /// Waits until the worker has left the registry.
    pub async fn finished(mut self) -> DrainOutcome {
        match self.done.wait_for(Option::is_some).await {
            Ok(outcome) => (*outcome).unwrap_or(DrainOutcome::Interrupted),
            Err(_) => DrainOutcome::Interrupted,
        }
    }
}
