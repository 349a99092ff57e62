use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use prometheus::IntGauge;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use switchyard_admission::AdmissionPermit;
use switchyard_workers::{CallOutcome, InFlightGuard};

use super::finish::{Capture, FinishHook, Finished};
use super::usage::UsageSniffer;

use crate::metrics::Metrics;
use crate::openai::Route;

/// Counts a request in the gateway-wide in-flight gauge for as long as it lives.
pub struct GatewayInFlight(IntGauge);

impl GatewayInFlight {
    pub fn enter(metrics: &Metrics) -> Self {
        metrics.in_flight.inc();
        Self(metrics.in_flight.clone())
    }
}

impl Drop for GatewayInFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// What to record about a response once it ends; holding it keeps the request counted
/// as in flight on its worker and on the gateway.
pub struct ResponseMeter {
    pub metrics: Arc<Metrics>,
    pub route: Route,
    pub started: Instant,
    pub _worker_in_flight: InFlightGuard,
    pub _gateway_in_flight: GatewayInFlight,
    /// Settled with the real usage when the response ends; dropped early (client gone),
    /// the admission layer books the estimate.
    pub permit: Option<AdmissionPermit>,
    /// When the request went to the worker: TTFT and TPOT observations start here.
    pub sent_at: Instant,
    pub status: http::StatusCode,
    /// Told how the response ended (spend by purpose, the response cache).
    pub on_finish: Option<FinishHook>,
}

/// The worker's response body passed through frame by frame (never buffered), measuring
/// time to first bytes and to the end. Dropping it early — the client went away — drops the
/// upstream body too, which closes that connection and so cancels the request on the worker.
pub struct MeteredBody {
    inner: Incoming,
    meter: Option<ResponseMeter>,
    is_sse: bool,
    ended: bool,
    usage: UsageSniffer,
    first_frame_at: Option<Instant>,
    capture: Capture,
}

impl MeteredBody {
    pub fn new(inner: Incoming, meter: ResponseMeter, is_sse: bool) -> Self {
        // Streams are captured too when the hook asks (the response cache assembles them).
        let capture_limit = meter
            .on_finish
            .as_ref()
            .map_or(0, |hook| hook.capture_limit);
        Self {
            capture: Capture::new(capture_limit),
            inner,
            meter: Some(meter),
            is_sse,
            ended: false,
            usage: UsageSniffer::default(),
            first_frame_at: None,
        }
    }

    /// Streams only: the breaker hears about the first byte (or its absence) and the
    /// worker's latency window gets TTFT and TPOT as this gateway saw them.
    fn report_stream(&self, meter: &ResponseMeter, failed: bool) {
        if !self.is_sse {
            return;
        }
        let worker = meter._worker_in_flight.worker();
        match self.first_frame_at {
            None if failed => worker.record_outcome(CallOutcome::Failure),
            None => worker.record_outcome(CallOutcome::Abandoned),
            Some(first) => {
                let ttft = first.saturating_duration_since(meter.sent_at);
                let tpot = self.usage.completion_tokens().filter(|n| *n >= 2).map(|n| {
                    Instant::now().saturating_duration_since(first) / (n as u32 - 1).max(1)
                });
                worker.observe_latency(ttft, tpot);
            }
        }
    }

    fn finish(&mut self, failed: bool) {
        if let Some(mut meter) = self.meter.take() {
            self.report_stream(&meter, failed);
            meter
                .metrics
                .request_duration
                .with_label_values(&[meter.route.label()])
                .observe(meter.started.elapsed().as_secs_f64());
            let mut tokens = None;
            if let Some(mut permit) = meter.permit.take() {
                if failed {
                    permit.mark_failed();
                }
                let actual = self.usage.settled_tokens(permit.estimated_tokens());
                tokens = Some(actual);
                permit.settle(actual);
            }
            if let Some(hook) = meter.on_finish.take() {
                (hook.callback)(Finished {
                    status: meter.status,
                    tokens: tokens.or_else(|| self.usage.total_tokens()).unwrap_or(0),
                    incomplete: failed,
                    body: if failed { None } else { self.capture.take() },
                });
            }
        }
    }
}

/// A streamed response that breaks mid-way ends with an SSE error event the client can
/// parse, instead of a truncated chunked body.
const SSE_UPSTREAM_ERROR: &str = "data: {\"error\":{\"message\":\"the worker's stream broke before it finished\",\"type\":\"upstream_error\",\"code\":\"upstream_stream_error\"}}\n\n";

impl Body for MeteredBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.usage.observe(data);
                    this.capture.observe(data);
                }
                if this.first_frame_at.is_none() && frame.is_data() {
                    let now = Instant::now();
                    this.first_frame_at = Some(now);
                    if let Some(meter) = &this.meter {
                        if this.is_sse {
                            meter
                                ._worker_in_flight
                                .worker()
                                .record_outcome(CallOutcome::Success {
                                    ttfb: now.saturating_duration_since(meter.sent_at),
                                });
                        }
                        meter
                            .metrics
                            .ttft
                            .with_label_values(&[meter.route.label()])
                            .observe(meter.started.elapsed().as_secs_f64());
                    }
                }
                // A body with a known length may never be polled to its end by the
                // server once the last byte is out: finish as soon as it is.
                if this.inner.is_end_stream() {
                    this.ended = true;
                    this.finish(false);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                tracing::warn!(%error, "worker response body failed mid-way");
                if let Some(meter) = &this.meter {
                    meter
                        .metrics
                        .upstream_errors
                        .with_label_values(&["body"])
                        .inc();
                }
                this.ended = true;
                this.finish(true);
                if this.is_sse {
                    Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                        SSE_UPSTREAM_ERROR.as_bytes(),
                    )))))
                } else {
                    Poll::Ready(Some(Err(error)))
                }
            }
            Poll::Ready(None) => {
                this.ended = true;
                this.finish(false);
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.is_sse {
            SizeHint::default()
        } else {
            self.inner.size_hint()
        }
    }
}

impl Drop for MeteredBody {
    fn drop(&mut self) {
        if let Some(meter) = &mut self.meter {
            // A client that leaves mid-stream pays at least for what it was sent.
            let tokens = meter.permit.take().map_or(0, |permit| {
                let tokens = self.usage.settled_tokens(permit.estimated_tokens());
                permit.settle(tokens);
                tokens
            });
            if let Some(hook) = meter.on_finish.take() {
                (hook.callback)(Finished {
                    status: meter.status,
                    tokens,
                    incomplete: true,
                    body: None,
                });
            }
            if self.is_sse && self.first_frame_at.is_none() {
                meter
                    ._worker_in_flight
                    .worker()
                    .record_outcome(CallOutcome::Abandoned);
            }
            meter
                .metrics
                .client_disconnects
                .with_label_values(&[meter.route.label()])
                .inc();
            tracing::debug!(
                "client went away before the response ended; upstream request cancelled"
            );
        }
    }
}
