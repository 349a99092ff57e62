//! What the gates granted one request: ledger reservations, bucket tokens, in-flight slots.
//! Settled with real usage when the response ends; rolled back untouched if dropped first.

use std::sync::Arc;
use switchyard_core::{Clock, Purpose, QuotaLedger, Reservation};
use tokio::sync::OwnedSemaphorePermit;

use super::callers::{CallerGates, ScopeGates};
use super::token_bucket::Settlement;

struct BucketCharge {
    gates: Arc<CallerGates>,
    purpose: Option<Purpose>,
    taken: f64,
}

impl BucketCharge {
    fn scope(&self) -> Option<&ScopeGates> {
        match self.purpose {
            None => Some(&self.gates.caller),
            Some(purpose) => self.gates.purposes.get(&purpose),
        }
    }
}

pub(crate) struct Holdings {
    ledger: Arc<dyn QuotaLedger>,
    clock: Arc<dyn Clock>,
    estimated_tokens: u64,
    reservations: Vec<Reservation>,
    bucket_charges: Vec<BucketCharge>,
    // Held only for their Drop: the caller's in-flight slots free when the holdings go.
    _in_flight: Vec<OwnedSemaphorePermit>,
}

impl Holdings {
    pub(crate) fn new(
        ledger: Arc<dyn QuotaLedger>,
        clock: Arc<dyn Clock>,
        estimated_tokens: u64,
    ) -> Self {
        Self {
            ledger,
            clock,
            estimated_tokens,
            reservations: Vec::new(),
            bucket_charges: Vec::new(),
            _in_flight: Vec::new(),
        }
    }

    pub(crate) fn estimated_tokens(&self) -> u64 {
        self.estimated_tokens
    }

    pub(crate) fn hold_reservation(&mut self, reservation: Reservation) {
        self.reservations.push(reservation);
    }

    pub(crate) fn hold_bucket(
        &mut self,
        gates: Arc<CallerGates>,
        purpose: Option<Purpose>,
        taken: f64,
    ) {
        self.bucket_charges.push(BucketCharge {
            gates,
            purpose,
            taken,
        });
    }

    pub(crate) fn hold_in_flight(&mut self, permit: OwnedSemaphorePermit) {
        self._in_flight.push(permit);
    }

    /// Books real usage: the ledger gets the actual count, buckets are refunded or put in
    /// debt. Returns what each bucket settlement did, for metrics.
    pub(crate) fn settle(mut self, actual_tokens: u64) -> Vec<Settlement> {
        for reservation in self.reservations.drain(..) {
            self.ledger.settle(reservation, actual_tokens);
        }
        let now = self.clock.now();
        self.bucket_charges
            .drain(..)
            .filter_map(|charge| {
                let bucket = charge.scope()?.bucket.as_ref()?;
                Some(bucket.lock().settle(charge.taken, actual_tokens, now))
            })
            .collect()
    }
}

impl Drop for Holdings {
    /// Not settled: the request never ran, so nothing was used.
    fn drop(&mut self) {
        for reservation in self.reservations.drain(..) {
            self.ledger.settle(reservation, 0);
        }
        let now = self.clock.now();
        for charge in self.bucket_charges.drain(..) {
            if let Some(bucket) = charge.scope().and_then(|scope| scope.bucket.as_ref()) {
                bucket.lock().refund(charge.taken, now);
            }
        }
    }
}
