//! Graceful shutdown. On a stop signal the replica goes through four phases:
//!
//! 1. **draining**: `/ready` answers 503 at once so load balancers and Kubernetes stop sending
//!    traffic; requests are still served (endpoint lists take a moment to converge) but every
//!    response carries `Connection: close` so clients reconnect elsewhere;
//! 2. **refusing**: after `server.shutdown_accept_ms`, new requests get 503 `shutting_down`
//!    (probes and `/metrics` still answer), in-flight requests and streams keep going;
//! 3. **drained**: once nothing is in flight, or at `server.shutdown_grace_ms`, a Raft leader
//!    steps down so the group elects a successor while this replica still votes;
//! 4. the gateway stops (ledger leases released, spend flushed) and the process exits.

mod handover;
pub mod middleware;

pub use handover::{Handover, step_down};

use prometheus::{IntCounter, IntCounterVec, IntGauge, Opts, Registry};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

const SERVING: u8 = 0;
const DRAINING: u8 = 1;
const REFUSING: u8 = 2;

/// The replica's shutdown phase and the requests it still owes an answer.
pub struct Lifecycle {
    phase: AtomicU8,
    in_flight: AtomicUsize,
    idle: Notify,
    metrics: LifecycleMetrics,
}

struct LifecycleMetrics {
    draining: IntGauge,
    refused: IntCounter,
    handovers: IntCounterVec,
}

impl Lifecycle {
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let draining = IntGauge::new(
            "switchyard_draining",
            "1 while this replica drains before it stops (`/ready` answers 503).",
        )?;
        let refused = IntCounter::new(
            "switchyard_shutdown_refused_total",
            "Requests refused with 503 `shutting_down` after the shutdown accept window.",
        )?;
        let handovers = IntCounterVec::new(
            Opts::new(
                "switchyard_leader_handovers_total",
                "Raft leadership hand-overs at shutdown, by outcome.",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(draining.clone()))?;
        registry.register(Box::new(refused.clone()))?;
        registry.register(Box::new(handovers.clone()))?;
        for outcome in Handover::LABELS {
            handovers.with_label_values(&[outcome]);
        }
        Ok(Self {
            phase: AtomicU8::new(SERVING),
            in_flight: AtomicUsize::new(0),
            idle: Notify::new(),
            metrics: LifecycleMetrics {
                draining,
                refused,
                handovers,
            },
        })
    }

    /// Counts what happened to Raft leadership at shutdown.
    pub fn count_handover(&self, outcome: &Handover) {
        self.metrics
            .handovers
            .with_label_values(&[outcome.label()])
            .inc();
    }

    /// Phase 1: readiness off, connections closed after their current response.
    pub fn begin_drain(&self) {
        let _ = self
            .phase
            .compare_exchange(SERVING, DRAINING, Ordering::SeqCst, Ordering::SeqCst);
        self.metrics.draining.set(1);
    }

    /// Phase 2: new requests are refused.
    pub fn stop_accepting(&self) {
        self.phase.store(REFUSING, Ordering::SeqCst);
        self.metrics.draining.set(1);
    }

    pub fn is_draining(&self) -> bool {
        self.phase.load(Ordering::SeqCst) != SERVING
    }

    pub fn is_refusing(&self) -> bool {
        self.phase.load(Ordering::SeqCst) == REFUSING
    }

    /// Requests (streams included, until their last byte) not yet finished.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Counts a request until the returned guard is dropped.
    pub fn enter(self: &Arc<Self>) -> InFlightGuard {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        InFlightGuard(Arc::clone(self))
    }

    fn count_refusal(&self) {
        self.metrics.refused.inc();
    }

    /// Waits until nothing is in flight; false when `deadline` passed first.
    pub async fn wait_idle(&self, deadline: Duration) -> bool {
        let wait = async {
            loop {
                let idle = self.idle.notified();
                tokio::pin!(idle);
                idle.as_mut().enable();
                if self.in_flight() == 0 {
                    return;
                }
                idle.await;
            }
        };
        tokio::time::timeout(deadline, wait).await.is_ok()
    }
}

/// Holds one request in the in-flight count.
pub struct InFlightGuard(Arc<Lifecycle>);

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        if self.0.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// The timings of a drain, from `[server]`.
#[derive(Clone, Copy, Debug)]
pub struct DrainPlan {
    /// How long requests are still accepted after readiness turned off.
    pub accept: Duration,
    /// How long in-flight requests may take to finish.
    pub drain: Duration,
    /// How long a leader waits for the group to elect its successor.
    pub handover: Duration,
}

impl DrainPlan {
    pub fn from_config(server: &crate::config::ServerConfig) -> Self {
        Self {
            accept: Duration::from_millis(server.shutdown_accept_ms),
            drain: Duration::from_millis(server.shutdown_grace_ms),
            handover: Duration::from_millis(server.shutdown_handover_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lifecycle() -> Arc<Lifecycle> {
        Arc::new(Lifecycle::new(&Registry::new()).expect("metrics"))
    }

    #[tokio::test(start_paused = true)]
    async fn wait_idle_returns_when_the_last_request_finishes() {
        let lifecycle = lifecycle();
        let first = lifecycle.enter();
        let second = lifecycle.enter();
        let waiter = {
            let lifecycle = Arc::clone(&lifecycle);
            tokio::spawn(async move { lifecycle.wait_idle(Duration::from_secs(30)).await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        drop(first);
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiter.is_finished(), "one request is still in flight");
        drop(second);
        assert!(waiter.await.expect("join"));
    }

    #[tokio::test(start_paused = true)]
    async fn wait_idle_gives_up_at_the_deadline() {
        let lifecycle = lifecycle();
        let _stuck = lifecycle.enter();
        let started = tokio::time::Instant::now();
        assert!(!lifecycle.wait_idle(Duration::from_secs(5)).await);
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[test]
    fn phases_move_forward_only() {
        let lifecycle = lifecycle();
        assert!(!lifecycle.is_draining());
        lifecycle.begin_drain();
        assert!(lifecycle.is_draining() && !lifecycle.is_refusing());
        lifecycle.stop_accepting();
        lifecycle.begin_drain();
        assert!(
            lifecycle.is_refusing(),
            "a late begin_drain does not reopen"
        );
    }
}
