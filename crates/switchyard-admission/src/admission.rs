//! The one type the gateway calls: identity → tags, then the gates and the priority queues.

use http::{HeaderMap, StatusCode};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use switchyard_core::{Clock, Priority, QuotaLedger, RequestTags};
use tracing::{info, warn};

use crate::AdmissionError;
use crate::capacity::AdaptiveLimit;
use crate::config::AdmissionConfig;
use crate::gates::GateChain;
use crate::gates::callers::{CallerDirectory, CallerGates};
use crate::identity::{Identity, IdentityError, UNKNOWN};
use crate::metrics::AdmissionMetrics;
use crate::overload::{DetectorEvent, GatewayState, OverloadDetector};
use crate::permit::AdmissionPermit;
use crate::refusal::{Refusal, code, gate};
use crate::retry_after::{exponent, retry_after};
use crate::shared::{Admission, Inner};
use crate::snapshot::{self, AdmissionSnapshot};
use crate::wfq::{Dispatcher, QueueRefusal};

impl Admission {
    pub fn new(
        config: AdmissionConfig,
        ledger: Arc<dyn QuotaLedger>,
        clock: Arc<dyn Clock>,
        registry: &prometheus::Registry,
    ) -> Result<Self, AdmissionError> {
        config.validate()?;
        let metrics = AdmissionMetrics::new(registry)?;
        let now = clock.now();
        let adaptive = config
            .adaptive
            .enabled
            .then(|| AdaptiveLimit::new(&config.adaptive, config.max_concurrent));
        let dispatcher = Dispatcher::with_adaptive(
            config.max_concurrent as usize,
            config.max_queued as usize,
            config.wfq.weights.to_array(),
            config.wfq.min_shares.to_array(),
            metrics.queue.clone(),
            adaptive,
        );
        let gates = GateChain {
            ledger,
            clock: clock.clone(),
            config: config.gates.clone(),
            callers: CallerDirectory::new(&config, now),
        };
        let detector = Mutex::new(OverloadDetector::new(&config.detector, &config.ramp, now));
        let inner = Inner {
            identity: Identity::new(&config),
            config,
            clock,
            gates,
            dispatcher,
            detector,
            metrics,
            degradation_ratio: AtomicU64::new(1.0_f64.to_bits()),
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// Identity → tags. Refusals here are 401 (unknown or missing key), 403 (purpose not
    /// allowed) or 400 (malformed header), without `Retry-After`.
    pub fn resolve(&self, headers: &HeaderMap) -> Result<RequestTags, Refusal> {
        let inner = &self.inner;
        match inner.identity.resolve(headers, inner.clock.now()) {
            Ok(tags) => {
                let anonymous = &*tags.caller == crate::identity::ANONYMOUS;
                inner.metrics.identified(anonymous);
                Ok(tags)
            }
            Err(error) => {
                let (status, code, outcome) = match &error {
                    IdentityError::Unauthorized => {
                        (StatusCode::UNAUTHORIZED, code::UNAUTHORIZED, "unauthorized")
                    }
                    IdentityError::Forbidden(_) => {
                        (StatusCode::FORBIDDEN, code::FORBIDDEN_PURPOSE, "forbidden")
                    }
                    IdentityError::BadHeader { .. } => {
                        (StatusCode::BAD_REQUEST, code::BAD_HEADER, "bad_header")
                    }
                };
                inner.metrics.identity(outcome);
                inner.metrics.refused(gate::IDENTITY, code, "none", UNKNOWN);
                Err(Refusal::new(
                    status,
                    gate::IDENTITY,
                    code,
                    error.to_string(),
                ))
            }
        }
    }

    /// Gates, then a dispatch slot. Call once per client request; gateway retries reuse the
    /// permit. Cancellation-safe: dropping the future gives back everything taken so far.
    pub async fn admit(
        &self,
        tags: &RequestTags,
        estimated_tokens: u64,
    ) -> Result<AdmissionPermit, Refusal> {
        let inner = &self.inner;
        let caller = inner.gates.caller(&tags.caller).clone();
        {
            let mut detector = inner.detector.lock();
            let events = detector.evaluate(inner.clock.now());
            inner.apply(&events, &detector);
            if detector.state() == GatewayState::Overloaded && tags.priority == Priority::P2 {
                drop(detector);
                return Err(inner.refuse(p2_paused(), tags, &caller));
            }
            // P0 within its guaranteed slots is protected, retries included: its share is
            // bounded, so its retries are no storm.
            let protected =
                tags.priority == Priority::P0 && inner.dispatcher.within_guarantee(Priority::P0);
            let storm_guarded = tags.client_retry > 0 && !protected;
            if storm_guarded && !detector.try_admit_retry() {
                drop(detector);
                let refusal = Refusal::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    gate::RECOVERY,
                    code::RETRY_DEFERRED,
                    "the gateway is recovering from overload and serves new requests before retries",
                );
                return Err(inner.refuse(refusal, tags, &caller));
            }
        }
        let holdings = match inner.gates.pass(tags, estimated_tokens).await {
            Ok(holdings) => holdings,
            Err(refusal) => return Err(inner.refuse(refusal, tags, &caller)),
        };
        let timeout = inner.config.wfq.queue_timeout(tags.priority);
        let started = tokio::time::Instant::now();
        let slot = inner
            .dispatcher
            .acquire(tags.priority, tags.caller.clone(), timeout)
            .await;
        let waited = started.elapsed();
        let capacity_refusal = slot.as_ref().is_err_and(|refused| refused.is_capacity());
        inner.record_queued(capacity_refusal, slot.is_ok() && tags.client_retry == 0);
        inner
            .metrics
            .queue_wait(tags.priority, slot.is_ok(), waited.as_secs_f64());
        let slot = match slot {
            Ok(slot) => slot,
            Err(refused) => {
                let mut refusal = queue_refusal(refused, tags.priority);
                let drain = match refused {
                    QueueRefusal::Deadline(wait) => Some(wait),
                    _ => inner.dispatcher.drain_time(tags.priority),
                };
                refusal.retry_after = drain.unwrap_or_default();
                return Err(inner.refuse(refusal, tags, &caller));
            }
        };
        caller.note_admission();
        if tags.client_retry > 0 {
            inner.metrics.client_retry("admitted");
        }
        inner
            .metrics
            .admitted(tags.priority, inner.identity.caller_label(&tags.caller));
        Ok(AdmissionPermit::new(
            inner.clone(),
            tags.clone(),
            waited,
            holdings,
            slot,
        ))
    }

    /// Overload-detector input: the share of workers the prefilters currently remove
    /// (0.0..=1.0). Call it every collector cycle; it also advances time-based transitions.
    pub fn report_fleet(&self, filtered_share: f64) {
        let inner = &self.inner;
        inner.metrics.filtered_share(filtered_share);
        let mut detector = inner.detector.lock();
        let events = detector.report_fleet(filtered_share, inner.clock.now());
        inner.apply(&events, &detector);
    }

    /// Advances time-based transitions (hold timers, ramp steps) without new input.
    pub fn tick(&self) {
        let inner = &self.inner;
        let mut detector = inner.detector.lock();
        let events = detector.evaluate(inner.clock.now());
        inner.apply(&events, &detector);
    }

    pub fn state(&self) -> GatewayState {
        self.inner.detector.lock().state()
    }

    /// Bounded metric label for a caller (top-N tenants, else `other`).
    pub fn caller_label(&self, caller: &str) -> &str {
        self.inner.identity.caller_label(caller)
    }

    pub fn config(&self) -> &AdmissionConfig {
        &self.inner.config
    }

    /// Everything `GET /admin/admission` shows.
    pub fn snapshot(&self) -> AdmissionSnapshot {
        snapshot::take(&self.inner)
    }
}

impl Inner {
    /// Fills in `Retry-After` and counts the refusal.
    fn refuse(&self, mut refusal: Refusal, tags: &RequestTags, caller: &CallerGates) -> Refusal {
        if refusal.is_retryable() {
            let in_a_row = caller.note_refusal();
            let streak = caller.identified.then_some(in_a_row);
            let k = exponent(tags.client_retry, streak);
            let backoff = retry_after(&self.config.retry_after, k, &mut rand::rng());
            refusal.retry_after = refusal.retry_after.max(backoff);
        }
        let label = self.identity.caller_label(&tags.caller);
        self.metrics
            .refused(refusal.gate, refusal.code, tags.priority.as_str(), label);
        if tags.client_retry > 0 {
            let outcome = if refusal.code == code::RETRY_DEFERRED {
                "deferred"
            } else {
                "refused"
            };
            self.metrics.client_retry(outcome);
        }
        refusal
    }

    /// A request left the queues: refused for capacity, or admitted (new requests earn
    /// the retry credit used while recovering).
    fn record_queued(&self, capacity_refusal: bool, new_request_admitted: bool) {
        let mut detector = self.detector.lock();
        if new_request_admitted {
            detector.note_new_request_admitted();
        }
        let events = detector.record_queued(capacity_refusal, self.clock.now());
        self.apply(&events, &detector);
    }

    pub(crate) fn record_finished(&self, failed: bool) {
        let mut detector = self.detector.lock();
        let events = detector.record_finished(failed, self.clock.now());
        self.apply(&events, &detector);
    }

    /// Makes the detector's decisions real: dispatch capacity, the P2 pause, metrics, logs.
    pub(crate) fn apply(&self, events: &[DetectorEvent], detector: &OverloadDetector) {
        if events.is_empty() {
            return;
        }
        let ratio = detector.capacity_ratio();
        for event in events {
            match *event {
                DetectorEvent::Transition { from, to } => {
                    self.metrics.transition(from, to);
                    if to == GatewayState::Overloaded {
                        warn!(
                            from = from.as_str(),
                            capacity_ratio = ratio,
                            "gateway overloaded: P2 paused, admission reduced"
                        );
                    } else {
                        info!(
                            from = from.as_str(),
                            to = to.as_str(),
                            capacity_ratio = ratio,
                            "gateway overload state changed"
                        );
                    }
                }
                DetectorEvent::RampUp => {
                    self.metrics.ramp_step("up");
                    info!(capacity_ratio = ratio, "recovery ramp stepped up");
                }
                DetectorEvent::RampBack => {
                    self.metrics.ramp_step("back");
                    warn!(
                        capacity_ratio = ratio,
                        "error rate rebounded: recovery ramp stepped back"
                    );
                }
                DetectorEvent::CutDeeper => {
                    self.metrics.ramp_step("cut_deeper");
                    warn!(
                        capacity_ratio = ratio,
                        "backend distress deepened: admission cut further"
                    );
                }
                DetectorEvent::Verdict(verdict) => {
                    self.metrics.verdict(verdict);
                    info!(
                        verdict = verdict.as_str(),
                        "overload detector verdict changed"
                    );
                }
            }
        }
        self.dispatcher.set_capacity(self.dispatch_slots(ratio));
        self.dispatcher
            .set_paused(Priority::P2, detector.state() == GatewayState::Overloaded);
        self.metrics.set_state(detector.state(), ratio);
    }
}

fn p2_paused() -> Refusal {
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        gate::QUEUE,
        code::P2_PAUSED,
        "the gateway is overloaded: batch (P2) traffic is paused",
    )
}

fn queue_refusal(refused: QueueRefusal, class: Priority) -> Refusal {
    match refused {
        QueueRefusal::Paused => p2_paused(),
        QueueRefusal::Full => Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            gate::QUEUE,
            code::QUEUE_FULL,
            "the gateway's admission queues are full",
        ),
        QueueRefusal::Timeout => Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            gate::QUEUE,
            code::QUEUE_TIMEOUT,
            format!("no dispatch slot freed up within the {class} queue timeout"),
        ),
        QueueRefusal::Deadline(wait) => Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            gate::QUEUE,
            code::QUEUE_DEADLINE,
            format!(
                "the {class} queue would keep this request about {} ms, past its wait limit",
                wait.as_millis()
            ),
        ),
        QueueRefusal::Shed => Refusal::new(
            StatusCode::SERVICE_UNAVAILABLE,
            gate::QUEUE,
            code::SHED,
            "the admission queues are full and more urgent requests arrived",
        ),
    }
}
