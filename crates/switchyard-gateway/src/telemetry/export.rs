//! The span exporter: a bounded queue the request path never waits on (a full queue drops
//! the span and counts it), drained by one thread that posts batches to the collector's
//! OTLP/HTTP endpoint. A failed post drops its batch (counted): traces are best effort and
//! must never hold memory or requests hostage to a collector outage.

use bytes::Bytes;
use http::{Method, Request, Uri, header};
use http_body_util::{BodyExt, Full};
use prometheus::{IntCounter, IntCounterVec, Opts};
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

use super::encode::{SpanRecord, export_request};

/// Where and how spans are exported.
#[derive(Clone, Debug)]
pub struct OtlpOptions {
    /// The collector's OTLP/HTTP traces URL; a bare `http://host:port` gets `/v1/traces`.
    pub endpoint: String,
    pub service_name: String,
    /// A batch is posted when it is this full or this old.
    pub max_batch: usize,
    pub batch_interval: Duration,
    /// Spans waiting for export; beyond it new spans are dropped.
    pub queue_capacity: usize,
    pub export_timeout: Duration,
}

impl OtlpOptions {
    pub fn new(endpoint: &str) -> Self {
        Self {
            endpoint: endpoint.to_string(),
            service_name: "switchyard".into(),
            max_batch: 512,
            batch_interval: Duration::from_secs(1),
            queue_capacity: 8192,
            export_timeout: Duration::from_secs(10),
        }
    }

    fn traces_uri(&self) -> Result<Uri, String> {
        let trimmed = self.endpoint.trim_end_matches('/');
        let uri: Uri = trimmed
            .parse()
            .map_err(|e| format!("--otlp-endpoint `{}`: {e}", self.endpoint))?;
        if uri.scheme_str() != Some("http") || uri.authority().is_none() {
            return Err(format!(
                "--otlp-endpoint `{}`: must be an http://host:port URL (OTLP/HTTP)",
                self.endpoint
            ));
        }
        if uri.path().is_empty() || uri.path() == "/" {
            return format!("{trimmed}/v1/traces")
                .parse()
                .map_err(|e| format!("--otlp-endpoint `{}`: {e}", self.endpoint));
        }
        Ok(uri)
    }
}

/// `switchyard_telemetry_*`: process-wide (the exporter outlives any one gateway), registered
/// into each gateway's registry.
#[derive(Clone)]
pub struct TelemetryCounters {
    pub exported: IntCounter,
    /// By reason: `queue_full`, `export_failed`.
    pub dropped: IntCounterVec,
}

/// The process's telemetry counters.
pub fn counters() -> &'static TelemetryCounters {
    static COUNTERS: OnceLock<TelemetryCounters> = OnceLock::new();
    COUNTERS.get_or_init(|| {
        let exported = IntCounter::with_opts(Opts::new(
            "switchyard_telemetry_spans_exported_total",
            "Spans the OTLP collector accepted.",
        ));
        let dropped = IntCounterVec::new(
            Opts::new(
                "switchyard_telemetry_spans_dropped_total",
                "Spans not exported, by reason: queue_full (the export queue was full), export_failed (the collector refused or was unreachable).",
            ),
            &["reason"],
        );
        match (exported, dropped) {
            (Ok(exported), Ok(dropped)) => {
                for reason in ["queue_full", "export_failed"] {
                    dropped.with_label_values(&[reason]);
                }
                TelemetryCounters { exported, dropped }
            }
            // Constant, valid names and labels: construction cannot fail.
            _ => unreachable!("invalid constant telemetry metric definition"),
        }
    })
}

pub(super) enum Message {
    Span(Box<SpanRecord>),
    Flush(oneshot::Sender<()>),
}

/// The sending side: cheap to clone, never blocks.
#[derive(Clone)]
pub struct Exporter {
    sender: mpsc::Sender<Message>,
}

impl Exporter {
    /// Starts the export thread. Errors name the bad option.
    pub fn start(options: OtlpOptions) -> Result<Self, String> {
        let uri = options.traces_uri()?;
        let (sender, receiver) = mpsc::channel(options.queue_capacity.max(1));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("OTLP exporter runtime: {e}"))?;
        std::thread::Builder::new()
            .name("otlp-exporter".into())
            .spawn(move || runtime.block_on(run(receiver, uri, options)))
            .map_err(|e| format!("OTLP exporter thread: {e}"))?;
        Ok(Self { sender })
    }

    /// An exporter whose queue is read by the caller (tests of what is queued).
    #[cfg(test)]
    pub(super) fn channel(capacity: usize) -> (Self, mpsc::Receiver<Message>) {
        let (sender, receiver) = mpsc::channel(capacity);
        (Self { sender }, receiver)
    }

    /// Queues a finished span, or drops it (counted) when the queue is full.
    pub(super) fn send(&self, span: SpanRecord) {
        if self.sender.try_send(Message::Span(Box::new(span))).is_err() {
            counters().dropped.with_label_values(&["queue_full"]).inc();
        }
    }

    /// Posts everything queued so far; returns when done or after `timeout`.
    pub async fn flush(&self, timeout: Duration) {
        let (done, finished) = oneshot::channel();
        let _ = tokio::time::timeout(timeout, async {
            if self.sender.send(Message::Flush(done)).await.is_ok() {
                let _ = finished.await;
            }
        })
        .await;
    }
}

async fn run(mut receiver: mpsc::Receiver<Message>, uri: Uri, options: OtlpOptions) {
    let client = switchyard_workers::build_http_client(&switchyard_workers::HttpClientConfig {
        pool_max_idle_per_host: 2,
        ..Default::default()
    });
    let mut batch: Vec<SpanRecord> = Vec::with_capacity(options.max_batch);
    let mut tick = tokio::time::interval(options.batch_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            message = receiver.recv() => match message {
                Some(Message::Span(span)) => {
                    batch.push(*span);
                    if batch.len() >= options.max_batch {
                        post(&client, &uri, &options, &mut batch).await;
                    }
                }
                Some(Message::Flush(done)) => {
                    post(&client, &uri, &options, &mut batch).await;
                    let _ = done.send(());
                }
                None => {
                    post(&client, &uri, &options, &mut batch).await;
                    return;
                }
            },
            _ = tick.tick() => post(&client, &uri, &options, &mut batch).await,
        }
    }
}

async fn post(
    client: &switchyard_workers::HttpClient,
    uri: &Uri,
    options: &OtlpOptions,
    batch: &mut Vec<SpanRecord>,
) {
    if batch.is_empty() {
        return;
    }
    let count = batch.len() as u64;
    let body = export_request(&options.service_name, batch).to_string();
    batch.clear();
    let request = Request::builder()
        .method(Method::POST)
        .uri(uri.clone())
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)));
    let outcome = match request {
        Ok(request) => tokio::time::timeout(options.export_timeout, async {
            let response = client.request(request).await.map_err(|e| e.to_string())?;
            let status = response.status();
            // Read the (small) answer so the connection goes back to the pool.
            let _ = response.into_body().collect().await;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("collector answered {status}"))
            }
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {:?}", options.export_timeout))),
        Err(e) => Err(e.to_string()),
    };
    match outcome {
        Ok(()) => counters().exported.inc_by(count),
        Err(error) => {
            let dropped = counters().dropped.with_label_values(&["export_failed"]);
            // One warning per outage, not one per batch.
            if dropped.get() == 0 || error.contains("answered") {
                tracing::warn!(%error, spans = count, "OTLP export failed; spans dropped");
            }
            dropped.inc_by(count);
        }
    }
}

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;
