use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use prometheus::IntGauge;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use switchyard_admission::AdmissionPermit;
use switchyard_workers::{CallOutcome, InFlightGuard};

use super::settle::{Capture, FinishHook, Finished};
use super::usage::UsageSniffer;
use axum::BoxError;

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
    /// Estimated prompt tokens: with the chunks streamed, what a broken stream is settled on.
    pub prompt_tokens: u64,
    /// The `stream` span: open while the body is (it ends with the last byte, or when the
    /// client goes away).
    pub _span: tracing::Span,
}

/// The worker's response body passed through frame by frame (never buffered), measuring
/// time to first bytes and to the end. Dropping it early — the client went away — drops the
/// upstream body too, which closes that connection and so cancels the request on the worker.
pub struct MeteredBody {
    inner: Incoming,
    /// A stream's first chunk, read while the attempt could still move to another worker.
    first_chunk: Option<Bytes>,
    meter: Option<ResponseMeter>,
    is_sse: bool,
    ended: bool,
    usage: UsageSniffer,
    first_frame_at: Option<Instant>,
    capture: Capture,
    /// Token chunks seen (SSE `data: {` events).
    chunks: u64,
    idle: Option<IdleTimer>,
}

/// Fires when the worker has sent nothing for `timeout`; re-armed by every frame. The
/// timer itself is made, and moved, only when the worker keeps the body waiting: most
/// answers arrive whole, and every frame would otherwise move it in the timer wheel.
struct IdleTimer {
    timeout: Duration,
    /// When the body began, or its last frame came.
    last: tokio::time::Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
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
            first_chunk: None,
            meter: Some(meter),
            is_sse,
            ended: false,
            usage: UsageSniffer::default(),
            first_frame_at: None,
            chunks: 0,
            idle: None,
        }
    }

    /// Sends `chunk` (already read from `inner`) before the rest of the body.
    pub fn with_first_chunk(mut self, chunk: Option<Bytes>) -> Self {
        self.first_chunk = chunk;
        self
    }

    /// Ends the response when the worker sends nothing for `timeout`.
    pub fn with_idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle = Some(IdleTimer {
            timeout,
            last: tokio::time::Instant::now(),
            sleep: None,
        });
        self
    }

    /// Bookkeeping for one frame from the worker, before it goes to the client.
    fn on_frame(&mut self, frame: &Frame<Bytes>) {
        if let Some(idle) = &mut self.idle {
            idle.last = tokio::time::Instant::now();
        }
        if let Some(data) = frame.data_ref() {
            self.usage.observe(data);
            self.capture.observe(data);
            // Only a broken stream is charged by its events; a JSON body is never scanned.
            if self.is_sse {
                self.chunks += count_events(data);
            }
        }
        if let Some(meter) = &mut self.meter {
            // A stream's chunks also count per stream: a worker that stalls every stream
            // after its first chunks is otherwise never silent while new streams arrive.
            if self.is_sse && frame.is_data() {
                meter._worker_in_flight.note_chunk();
            } else {
                meter._worker_in_flight.worker().note_progress();
            }
        }
        if self.first_frame_at.is_none() && frame.is_data() {
            let now = Instant::now();
            self.first_frame_at = Some(now);
            if let Some(meter) = &self.meter {
                meter
                    .metrics
                    .ttft_by_route
                    .get(meter.route as usize, meter.route.label())
                    .observe(meter.started.elapsed().as_secs_f64());
            }
        }
    }

    /// Whether the worker has been silent for the idle timeout.
    fn idle_expired(&mut self, cx: &mut Context<'_>) -> bool {
        let Some(idle) = &mut self.idle else {
            return false;
        };
        let deadline = idle.last + idle.timeout;
        match &mut idle.sleep {
            Some(sleep) if sleep.deadline() != deadline => sleep.as_mut().reset(deadline),
            Some(_) => {}
            None => idle.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
        }
        idle.sleep
            .as_mut()
            .is_some_and(|sleep| sleep.as_mut().poll(cx).is_ready())
    }

    /// The worker stalled mid-answer: the call is a failure, the client gets an error it can
    /// parse (a stream never gets a `[DONE]` after it), spend is what was streamed.
    fn on_stall(&mut self) -> Result<Frame<Bytes>, BoxError> {
        tracing::warn!(
            chunks = self.chunks,
            "worker stalled mid-answer; response ended"
        );
        if let Some(meter) = &self.meter {
            meter
                .metrics
                .upstream_errors
                .with_label_values(&["stream_idle"])
                .inc();
        }
        self.ended = true;
        self.finish(true);
        if self.is_sse {
            Ok(Frame::data(Bytes::from_static(SSE_STALLED.as_bytes())))
        } else {
            Err("the worker stopped sending its answer".into())
        }
    }

    /// Streams only: the breaker hears one verdict per call, when the stream ends — a
    /// success (with its time to first byte) only if it finished, a failure if the worker
    /// broke or stalled it, even after its first chunk — and the worker's latency window
    /// gets TTFT and TPOT as this gateway saw them.
    fn report_stream(&self, meter: &ResponseMeter, failed: bool) {
        if !self.is_sse {
            return;
        }
        let worker = meter._worker_in_flight.worker();
        let Some(first) = self.first_frame_at else {
            worker.record_outcome(if failed {
                CallOutcome::Failure
            } else {
                CallOutcome::Abandoned
            });
            return;
        };
        let ttft = first.saturating_duration_since(meter.sent_at);
        if failed {
            worker.record_outcome(CallOutcome::Failure);
        } else {
            worker.record_outcome(CallOutcome::Success { ttfb: ttft });
            worker.observe_prefill(meter.prompt_tokens, ttft);
        }
        // A stalled stream's last gap is the stall, not its pace.
        let tpot = self
            .usage
            .completion_tokens()
            .filter(|n| *n >= 2 && !failed)
            .map(|n| Instant::now().saturating_duration_since(first) / (n as u32 - 1).max(1));
        worker.observe_latency(ttft, tpot);
    }

    fn finish(&mut self, failed: bool) {
        if let Some(mut meter) = self.meter.take() {
            if !failed && meter.status.is_success() {
                meter._worker_in_flight.note_completed();
            }
            self.report_stream(&meter, failed);
            meter
                .metrics
                .request_duration_by_route
                .get(meter.route as usize, meter.route.label())
                .observe(meter.started.elapsed().as_secs_f64());
            let mut tokens = None;
            if let Some(mut permit) = meter.permit.take() {
                if failed {
                    permit.mark_failed();
                }
                // A stream the worker broke without reporting usage is charged for what
                // reached the client. (The usage is searched for only on that branch: the
                // search runs again inside `settled_tokens`.)
                let actual = if failed && self.is_sse && self.usage.total_tokens().is_none() {
                    meter.prompt_tokens.saturating_add(self.chunks)
                } else {
                    self.usage.settled_tokens(permit.estimated_tokens())
                };
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

/// The same for a stream whose worker went silent for `upstream.stream_idle_timeout_ms`.
const SSE_STALLED: &str = "data: {\"error\":{\"message\":\"the worker stopped sending this stream before it finished\",\"type\":\"upstream_error\",\"code\":\"upstream_stream_stalled\"}}\n\n";

/// SSE events in a chunk of the body. Events split across chunks may be missed or counted
/// twice only at a boundary, which is good enough for charging a broken stream.
fn count_events(data: &[u8]) -> u64 {
    const EVENT: &[u8] = b"data: {";
    data.windows(EVENT.len()).filter(|w| *w == EVENT).count() as u64
}

impl Body for MeteredBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        if let Some(chunk) = this.first_chunk.take() {
            let frame = Frame::data(chunk);
            this.on_frame(&frame);
            if this.inner.is_end_stream() {
                this.ended = true;
                this.finish(false);
            }
            return Poll::Ready(Some(Ok(frame)));
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => {
                if this.idle_expired(cx) {
                    Poll::Ready(Some(this.on_stall()))
                } else {
                    Poll::Pending
                }
            }
            Poll::Ready(Some(Ok(frame))) => {
                this.on_frame(&frame);
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
                    Poll::Ready(Some(Err(error.into())))
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
        self.ended || (self.first_chunk.is_none() && self.inner.is_end_stream())
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
            if self.is_sse {
                // The worker was answering when the client left: that says nothing against it.
                let outcome = match self.first_frame_at {
                    Some(first) => CallOutcome::Success {
                        ttfb: first.saturating_duration_since(meter.sent_at),
                    },
                    None => CallOutcome::Abandoned,
                };
                meter._worker_in_flight.worker().record_outcome(outcome);
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
