//! A wave: the warmups that came due together (plus those that come due while it runs),
//! dispatched no faster than its ramp allows.

use std::collections::VecDeque;
use std::sync::Arc;

use super::report::WaveStatus;
use super::steady::SteadyP95;
use crate::clock::UnixMillis;
use crate::config::WarmupRampConfig;
use crate::ramp::Ramp;
use crate::resource::ResourceCell;

pub(crate) struct Wave {
    pub(crate) id: u64,
    pub(crate) started: UnixMillis,
    pub(crate) ramp: Ramp,
    pub(crate) steady_p95: SteadyP95,
    pub(crate) queue: VecDeque<Arc<ResourceCell>>,
    pub(crate) running: usize,
    pub(crate) warmed: u64,
    pub(crate) failed: u64,
}

impl Wave {
    pub(crate) fn new(
        id: u64,
        config: &WarmupRampConfig,
        steady_p95: SteadyP95,
        now: UnixMillis,
    ) -> Self {
        let mut ramp = Ramp::new(config, now);
        ramp.set_steady_p95_ms(steady_p95.ms);
        Self {
            id,
            started: now,
            ramp,
            steady_p95,
            queue: VecDeque::new(),
            running: 0,
            warmed: 0,
            failed: 0,
        }
    }

    /// The next warmup to start, if the ramp has room for one more.
    pub(crate) fn next_to_start(&mut self) -> Option<Arc<ResourceCell>> {
        if self.running >= self.ramp.concurrency() as usize {
            return None;
        }
        let next = self.queue.pop_front()?;
        self.running += 1;
        Some(next)
    }

    pub(crate) fn is_done(&self) -> bool {
        self.queue.is_empty() && self.running == 0
    }

    pub(crate) fn status(&self) -> WaveStatus {
        WaveStatus {
            id: self.id,
            started_unix_ms: self.started,
            step: self.ramp.step(),
            concurrency: self.ramp.concurrency(),
            queued: self.queue.len(),
            running: self.running,
            warmed: self.warmed,
            failed: self.failed,
            steady_p95: self.steady_p95,
        }
    }
}
