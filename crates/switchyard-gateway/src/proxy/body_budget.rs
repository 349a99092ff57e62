//! A budget on request-body bytes held before (and while) a request waits for admission:
//! bodies are read and parsed before admission's concurrency limit applies, so without it
//! many slow or large uploads could hold unbounded memory.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct BodyBudget {
    limit: u64,
    held: AtomicU64,
    held_gauge: IntGauge,
    refusals: IntCounterVec,
}

impl BodyBudget {
    pub fn new(limit: u64, registry: &Registry) -> Result<Arc<Self>, prometheus::Error> {
        let held_gauge = IntGauge::new(
            "switchyard_request_body_bytes_held",
            "Request-body bytes read and held by requests not yet answered.",
        )?;
        let refusals = IntCounterVec::new(
            Opts::new(
                "switchyard_request_body_refusals_total",
                "Request bodies refused while reading, by reason (budget, timeout, too_large).",
            ),
            &["reason"],
        )?;
        registry.register(Box::new(held_gauge.clone()))?;
        registry.register(Box::new(refusals.clone()))?;
        Ok(Arc::new(Self {
            limit,
            held: AtomicU64::new(0),
            held_gauge,
            refusals,
        }))
    }

    /// Holds `bytes` of the budget, or `None` when that would pass the limit.
    pub fn hold(self: &Arc<Self>, bytes: u64) -> Option<BodyHold> {
        let mut hold = BodyHold {
            budget: Arc::clone(self),
            bytes: 0,
        };
        hold.grow(bytes).then_some(hold)
    }

    pub fn held(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }

    pub fn count_refusal(&self, reason: &'static str) {
        self.refusals.with_label_values(&[reason]).inc();
    }

    fn take(&self, bytes: u64) -> bool {
        let taken = self
            .held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|sum| *sum <= self.limit)
            })
            .is_ok();
        if taken {
            self.held_gauge
                .add(i64::try_from(bytes).unwrap_or(i64::MAX));
        }
        taken
    }

    fn give_back(&self, bytes: u64) {
        self.held.fetch_sub(bytes, Ordering::AcqRel);
        self.held_gauge
            .sub(i64::try_from(bytes).unwrap_or(i64::MAX));
    }
}

/// Bytes of the budget held by one request; released when dropped.
pub struct BodyHold {
    budget: Arc<BodyBudget>,
    bytes: u64,
}

impl BodyHold {
    /// Holds `more` bytes in addition; false (and nothing more held) past the limit.
    pub fn grow(&mut self, more: u64) -> bool {
        if more == 0 {
            return true;
        }
        let taken = self.budget.take(more);
        if taken {
            self.bytes += more;
        }
        taken
    }
}

impl Drop for BodyHold {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.give_back(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_are_bounded_and_released_on_drop() {
        let budget = BodyBudget::new(100, &Registry::new()).unwrap();
        let mut a = budget.hold(60).unwrap();
        assert!(budget.hold(41).is_none());
        assert!(!a.grow(41));
        assert!(a.grow(40));
        assert_eq!(budget.held(), 100);
        drop(a);
        assert_eq!(budget.held(), 0);
        assert!(budget.hold(100).is_some());
    }
}
