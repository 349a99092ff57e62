//! Shared engine state: prefix cache, batch scheduler, counters and timing model.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::config::SimConfig;
use crate::fault::{Fault, FaultSwitch};
use crate::kv_cache::PrefixCache;
use crate::metrics::{LoadGauges, SimMetrics};
use crate::scheduler::{Admission, Scheduler, Ticket};
use crate::warmth::Warmth;

/// Snapshot of a worker's counters and current load.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct SimStats {
    /// Inference requests accepted by the engine.
    pub requests_received: u64,
    /// Requests whose whole answer was produced.
    pub requests_completed: u64,
    /// The client went away before the response finished (stream dropped / conn closed).
    pub requests_cancelled: u64,
    /// Requests holding a batch slot now.
    pub running: u64,
    /// Requests queued for a slot now.
    pub waiting: u64,
    /// Prompt tokens of admitted requests.
    pub prompt_tokens: u64,
    /// Prompt tokens served from the prefix cache.
    pub cached_tokens: u64,
    /// Output tokens produced.
    pub generation_tokens: u64,
    /// Times the engine was found cold and reloaded its model (cold starts paid).
    pub cold_starts: u64,
}

/// Everything mutated by requests, behind one short-held lock.
#[derive(Debug)]
pub(crate) struct EngineState {
    pub(crate) cache: PrefixCache,
    pub(crate) scheduler: Scheduler,
    /// KV blocks held by running requests that are not (yet) in the prefix cache.
    pub(crate) private_blocks: usize,
    /// Counters; `running` and `waiting` are filled from the scheduler on read.
    pub(crate) counters: SimStats,
    pub(crate) warmth: Warmth,
}

#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) config: SimConfig,
    pub(crate) faults: FaultSwitch,
    pub(crate) metrics: SimMetrics,
    state: Mutex<EngineState>,
}

/// Longest simulated pause; keeps absurd configurations from overflowing `Duration`.
const MAX_SIMULATED_SECS: f64 = 86_400.0;

fn millis(ms: f64) -> Duration {
    if ms.is_finite() && ms > 0.0 {
        Duration::from_secs_f64((ms / 1000.0).min(MAX_SIMULATED_SECS))
    } else {
        Duration::ZERO
    }
}

impl Engine {
    pub(crate) fn new(config: SimConfig) -> Result<Self, prometheus::Error> {
        let metrics = SimMetrics::new(&config.model)?;
        let state = EngineState {
            cache: PrefixCache::new(config.kv_blocks),
            scheduler: Scheduler::new(config.max_running),
            private_blocks: 0,
            counters: SimStats::default(),
            warmth: Warmth::new(
                millis(config.cold_start_ms * config.time_scale),
                millis(config.cold_after_ms * config.time_scale),
            ),
        };
        Ok(Self {
            config,
            faults: FaultSwitch::default(),
            metrics,
            state: Mutex::new(state),
        })
    }

    /// Runs `f` under the state lock; callers keep `f` short and never await in it.
    pub(crate) fn with_state<R>(&self, f: impl FnOnce(&mut EngineState) -> R) -> R {
        f(&mut self.state.lock())
    }

    pub(crate) fn stats(&self) -> SimStats {
        self.with_state(|state| SimStats {
            running: state.scheduler.running() as u64,
            waiting: state.scheduler.waiting() as u64,
            ..state.counters
        })
    }

    pub(crate) fn load(&self) -> LoadGauges {
        let now = Instant::now();
        self.with_state(|state| {
            let capacity = state.cache.capacity().max(1) as f64;
            let used = (state.cache.len() + state.private_blocks) as f64;
            LoadGauges {
                running: state.scheduler.running(),
                waiting: state.scheduler.waiting(),
                kv_cache_usage: (used / capacity).min(1.0),
                cold: state.warmth.is_cold(now),
            }
        })
    }

    /// Registers an arriving request. Returns when its prefill may start at the earliest:
    /// a cold engine reloads first (its prefix cache is gone), and a reload in progress is
    /// shared by everyone who arrives during it.
    pub(crate) fn arrive(&self) -> Option<Instant> {
        let arrival = self.with_state(|state| {
            state.counters.requests_received += 1;
            let arrival = state.warmth.arrive(Instant::now());
            if arrival.started_wake {
                state.cache.clear();
                state.counters.cold_starts += 1;
            }
            arrival
        });
        if arrival.started_wake {
            self.metrics.cold_starts.inc();
            tracing::debug!(worker = %self.config.name, "cold start: reloading the model");
        }
        arrival.ready_at
    }

    pub(crate) fn render_metrics(&self) -> Result<String, prometheus::Error> {
        self.metrics.render(self.load())
    }

    /// A simulated duration after `time_scale` and the current `slow` fault.
    fn scaled(&self, ms: f64) -> Duration {
        millis(ms * self.config.time_scale * self.faults.get().slow_factor())
    }

    /// Prefill cost grows 5 % per extra running request, as batched prefill does.
    pub(crate) fn prefill_duration(&self, uncached_tokens: usize, running: usize) -> Duration {
        let contention = 1.0 + 0.05 * running.saturating_sub(1) as f64;
        self.scaled(
            uncached_tokens as f64 / 1000.0 * self.config.prefill_ms_per_1k_tokens * contention,
        )
    }

    /// One decode step for a batch of `running`: memory-bound below the compute knee (the
    /// weight read is shared, each request adds `decode_batch_cost`), compute-bound above
    /// it (the step grows with the batch). A trickle fault sets the pace instead.
    pub(crate) fn decode_duration(&self, running: usize) -> Duration {
        if let Fault::Trickle { chunk_interval_ms } = self.faults.get() {
            return Duration::from_millis(chunk_interval_ms);
        }
        let memory_bound = 1.0 + self.config.decode_batch_cost * running.saturating_sub(1) as f64;
        let compute_bound = match self.config.compute_knee {
            0 => 0.0,
            knee => running as f64 / knee as f64,
        };
        self.scaled(self.config.decode_ms_per_token * memory_bound.max(compute_bound))
    }

    /// Waits (FIFO) for a batch slot. Dropping the future leaves the queue cleanly.
    pub(crate) async fn acquire_slot(self: &Arc<Self>) -> SlotGuard {
        let admission = self.with_state(|state| state.scheduler.admit());
        match admission {
            Admission::Running => SlotGuard {
                engine: Arc::clone(self),
            },
            Admission::Queued(ticket, receiver) => {
                let mut waiter = QueuedWaiter {
                    engine: Arc::clone(self),
                    ticket,
                    receiver,
                    granted: false,
                };
                // The scheduler never drops a sender without sending while the
                // engine lives, so either outcome means the slot is ours.
                let _ = (&mut waiter.receiver).await;
                waiter.granted = true;
                SlotGuard {
                    engine: Arc::clone(self),
                }
            }
        }
    }
}

/// A held batch slot; dropping it admits the next queued request.
#[derive(Debug)]
pub(crate) struct SlotGuard {
    engine: Arc<Engine>,
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        self.engine.with_state(|state| state.scheduler.release());
    }
}

/// Cleans up after a waiter whose future was dropped while queued.
struct QueuedWaiter {
    engine: Arc<Engine>,
    ticket: Ticket,
    receiver: oneshot::Receiver<()>,
    granted: bool,
}

impl Drop for QueuedWaiter {
    fn drop(&mut self) {
        if self.granted {
            return;
        }
        self.engine.with_state(|state| {
            // Missing from the queue means a slot was handed over just before the
            // client left: give it back so it is not leaked.
            if !state.scheduler.leave_queue(self.ticket) {
                state.scheduler.release();
            }
        });
    }
}
