//! The state every part of admission shares: [`Admission`] is a cheap handle to it.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use switchyard_core::Clock;

use crate::config::AdmissionConfig;
use crate::gates::GateChain;
use crate::identity::Identity;
use crate::metrics::AdmissionMetrics;
use crate::overload::OverloadDetector;
use crate::wfq::Dispatcher;

/// Admission control for one gateway process; cheap to clone (shared).
#[derive(Clone)]
pub struct Admission {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: AdmissionConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) identity: Identity,
    pub(crate) gates: GateChain,
    pub(crate) dispatcher: Arc<Dispatcher>,
    // Lock order: detector, then dispatcher (applying a transition); never the reverse.
    pub(crate) detector: Mutex<OverloadDetector>,
    pub(crate) metrics: AdmissionMetrics,
    /// Degradation's share of `max_concurrent` (f64 bits), on top of the recovery ramp's.
    pub(crate) degradation_ratio: AtomicU64,
}
