use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use prometheus::IntGauge;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use switchyard_workers::InFlightGuard;

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
}

/// The worker's response body passed through frame by frame (never buffered), measuring
/// time to first bytes and to the end. Dropping it early — the client went away — drops the
/// upstream body too, which closes that connection and so cancels the request on the worker.
pub struct MeteredBody {
    inner: Incoming,
    meter: Option<ResponseMeter>,
    first_frame_seen: bool,
    is_sse: bool,
    ended: bool,
}

impl MeteredBody {
    pub fn new(inner: Incoming, meter: ResponseMeter, is_sse: bool) -> Self {
        Self {
            inner,
            meter: Some(meter),
            first_frame_seen: false,
            is_sse,
            ended: false,
        }
    }

    fn finish(&mut self) {
        if let Some(meter) = self.meter.take() {
            meter
                .metrics
                .request_duration
                .with_label_values(&[meter.route.label()])
                .observe(meter.started.elapsed().as_secs_f64());
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
                if !this.first_frame_seen && frame.is_data() {
                    this.first_frame_seen = true;
                    if let Some(meter) = &this.meter {
                        meter
                            .metrics
                            .ttft
                            .with_label_values(&[meter.route.label()])
                            .observe(meter.started.elapsed().as_secs_f64());
                    }
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
                this.finish();
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
                this.finish();
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
        if let Some(meter) = &self.meter {
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
