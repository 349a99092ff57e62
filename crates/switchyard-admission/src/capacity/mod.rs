//! Capacity steered from outside the overload detector: graded degradation scales the
//! dispatch capacity (level 1 and worse run at a share of `max_concurrent`), on top of the
//! recovery ramp; the optional adaptive limit (`adaptive`) caps it by observed latency.

pub(crate) mod adaptive;

pub(crate) use adaptive::AdaptiveLimit;

use std::sync::atomic::Ordering;
use tracing::info;

use crate::AdmissionError;
use crate::shared::{Admission, Inner};

impl Admission {
    /// Scales the dispatch capacity to `ratio` (0 < ratio ≤ 1) of what the overload detector
    /// allows, at once: waiters are dispatched if it grew; if it shrank, requests in flight
    /// finish and no new one starts until the gateway is under the new limit. Returns the
    /// dispatch slots now offered.
    pub fn set_capacity_ratio(&self, ratio: f64) -> Result<usize, AdmissionError> {
        if !(ratio.is_finite() && ratio > 0.0 && ratio <= 1.0) {
            return Err(AdmissionError::invalid(
                "capacity_ratio",
                format!("must be within (0, 1], got {ratio}"),
            ));
        }
        let inner = &self.inner;
        // Lock order: detector, then dispatcher (as in `Inner::apply`), so a concurrent
        // detector transition cannot overwrite the new capacity with a stale one.
        let detector = inner.detector.lock();
        inner
            .degradation_ratio
            .store(ratio.to_bits(), Ordering::Release);
        let slots = inner.dispatch_slots(detector.capacity_ratio());
        inner.dispatcher.set_capacity(slots);
        drop(detector);
        inner.metrics.set_degradation_ratio(ratio);
        info!(ratio, slots, "admission capacity ratio set by degradation");
        Ok(slots)
    }

    /// The share set by [`Admission::set_capacity_ratio`] (1.0 until then).
    pub fn capacity_ratio(&self) -> f64 {
        self.inner.degradation_ratio()
    }

    /// Dispatch slots offered now (max_concurrent × recovery ramp × degradation ratio).
    pub fn dispatch_capacity(&self) -> usize {
        self.inner.dispatcher.stats().capacity
    }
}

impl Inner {
    pub(crate) fn degradation_ratio(&self) -> f64 {
        f64::from_bits(self.degradation_ratio.load(Ordering::Acquire))
    }

    /// Slots for the detector's `ramp_ratio` and degradation's share; never fewer than one.
    pub(crate) fn dispatch_slots(&self, ramp_ratio: f64) -> usize {
        let slots = f64::from(self.config.max_concurrent) * ramp_ratio * self.degradation_ratio();
        (slots.ceil() as usize).max(1)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use switchyard_core::{ManualClock, Priority, RequestTags};

    use crate::{Admission, AdmissionConfig, InMemoryLedger};

    fn admission(config: AdmissionConfig) -> (Admission, Arc<InMemoryLedger>) {
        let clock = Arc::new(ManualClock::new());
        let ledger = Arc::new(InMemoryLedger::from_config(&config, clock.clone()));
        let registry = prometheus::Registry::new();
        let admission = Admission::new(config, ledger.clone(), clock, &registry).unwrap();
        (admission, ledger)
    }

    fn tags() -> RequestTags {
        RequestTags {
            priority: Priority::P0,
            ..RequestTags::anonymous()
        }
    }

    #[tokio::test]
    async fn the_ratio_scales_dispatch_capacity_and_refuses_nonsense() {
        let (admission, _) = admission(AdmissionConfig {
            max_concurrent: 10,
            ..AdmissionConfig::default()
        });
        assert_eq!(admission.dispatch_capacity(), 10);
        assert_eq!(admission.set_capacity_ratio(0.8).unwrap(), 8);
        assert_eq!(admission.dispatch_capacity(), 8);
        assert_eq!(admission.capacity_ratio(), 0.8);
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(admission.admit(&tags(), 1).await.unwrap());
        }
        let ninth = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            admission.admit(&tags(), 1),
        )
        .await;
        assert!(ninth.is_err(), "the ninth request waits: only 8 slots");
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(admission.set_capacity_ratio(bad).is_err(), "{bad}");
        }
        assert_eq!(
            admission.capacity_ratio(),
            0.8,
            "a refused ratio changes nothing"
        );
        assert_eq!(admission.set_capacity_ratio(1.0).unwrap(), 10);
        assert!(admission.admit(&tags(), 1).await.is_ok(), "room again");
        drop(held);
    }
}
