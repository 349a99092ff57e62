//! An admitted request's claim on the gateway: a dispatch slot, the caller's in-flight slot,
//! and the budget and rate tokens its estimate reserved.

use std::sync::Arc;
use std::time::Duration;
use switchyard_core::RequestTags;

use crate::gates::Holdings;
use crate::shared::Inner;
use crate::wfq::DispatchSlot;

/// Hold it for the whole request, gateway retries included; then `settle` it with the real
/// token count. Dropping it unsettled books the estimate as spent (the safe assumption when
/// the real count is unknown). Either way every slot it holds is freed.
#[must_use = "dropping the permit ends the request's admission"]
pub struct AdmissionPermit {
    inner: Arc<Inner>,
    tags: RequestTags,
    queue_wait: Duration,
    failed: bool,
    holdings: Option<Holdings>,
    // Dropped after `Drop::drop` has settled, so the next waiter starts only then.
    _slot: DispatchSlot,
}

impl AdmissionPermit {
    pub(crate) fn new(
        inner: Arc<Inner>,
        tags: RequestTags,
        queue_wait: Duration,
        holdings: Holdings,
        slot: DispatchSlot,
    ) -> Self {
        Self {
            inner,
            tags,
            queue_wait,
            failed: false,
            holdings: Some(holdings),
            _slot: slot,
        }
    }

    pub fn tags(&self) -> &RequestTags {
        &self.tags
    }

    /// Time spent waiting for a dispatch slot.
    pub fn queue_wait(&self) -> Duration {
        self.queue_wait
    }

    pub fn estimated_tokens(&self) -> u64 {
        self.holdings.as_ref().map_or(0, Holdings::estimated_tokens)
    }

    /// The request failed (upstream error, timeout): counts toward the error rate the
    /// overload detector and the recovery ramp watch. Client disconnects are not failures.
    pub fn mark_failed(&mut self) {
        self.failed = true;
    }

    /// Books the real usage (prompt + completion tokens): refunds or debits the caller's
    /// token bucket and replaces the ledger reservation.
    pub fn settle(mut self, actual_tokens: u64) {
        self.finish(actual_tokens);
    }

    fn finish(&mut self, actual_tokens: u64) {
        let Some(holdings) = self.holdings.take() else {
            return;
        };
        for settlement in holdings.settle(actual_tokens) {
            self.inner.metrics.bucket_settled(settlement);
        }
        self.inner.record_finished(self.failed);
    }
}

impl Drop for AdmissionPermit {
    fn drop(&mut self) {
        let estimate = self.estimated_tokens();
        self.finish(estimate);
    }
}

impl std::fmt::Debug for AdmissionPermit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdmissionPermit")
            .field("tags", &self.tags)
            .field("queue_wait", &self.queue_wait)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}
