//! A `tracing` layer that turns the request path's spans into OTLP spans.
//!
//! Only spans named in [`EXPORTED_SPANS`] from this crate are exported. Three fields are ids,
//! not attributes: `trace_id` and `parent_span_id` (set on the `request` span from the
//! client's `traceparent` or the request id) and `span_id` (set on an `attempt` span to the id
//! its `traceparent` header carries to the worker, so the worker's spans hang below it).
//! Other spans inherit the trace of their nearest exported ancestor and get a fresh id.
//! A span ends when it closes: the `stream` span lives in the response body, so it and its
//! `request` parent end when the last byte is sent or the client goes away. The stage spans
//! are at DEBUG level, so without an exporter (and with the default `RUST_LOG=info`) they are
//! disabled at their call sites and cost the request path nothing.

use serde_json::{Map, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;
use tracing::span::{Attributes, Id, Record};
use tracing::{Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use super::encode::{SpanKind, SpanRecord};
use super::export::Exporter;
use super::fields::JsonFieldVisitor;
use super::ids::new_span_id;

/// The spans exported, with their kind.
pub const EXPORTED_SPANS: &[(&str, SpanKind)] = &[
    ("request", SpanKind::Server),
    ("admit", SpanKind::Internal),
    ("select", SpanKind::Internal),
    ("attempt", SpanKind::Client),
    ("stream", SpanKind::Internal),
];

/// Fields read as ids rather than attributes.
const TRACE_ID: &str = "trace_id";
const SPAN_ID: &str = "span_id";
const PARENT_SPAN_ID: &str = "parent_span_id";
/// A span with this field set to a value of 500 or more, or an `error` field, ends in error.
const STATUS_FIELD: &str = "status";

pub struct OtlpLayer {
    exporter: Exporter,
}

/// Set once a layer exists: the request path then fills the fields only the exporter reads.
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// Whether spans are exported (an [`OtlpLayer`] was built for the process's subscriber).
pub fn exports_spans() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

impl OtlpLayer {
    pub fn new(exporter: Exporter) -> Self {
        EXPORTING.store(true, Ordering::Relaxed);
        Self { exporter }
    }

    /// Whether a span is one of ours (for a per-layer filter: independent of `RUST_LOG`).
    pub fn exports(metadata: &Metadata<'_>) -> bool {
        metadata.is_span()
            && metadata.target().starts_with("switchyard_gateway")
            && kind_of(metadata.name()).is_some()
    }
}

fn kind_of(name: &str) -> Option<(&'static str, SpanKind)> {
    EXPORTED_SPANS.iter().copied().find(|(n, _)| *n == name)
}

/// An exported span while it is open.
struct Open {
    record: SpanRecord,
}

/// A hex id of `len` digits from a field, if it is one (lowercase, not all zeros).
fn take_id(fields: &mut Map<String, Value>, key: &str, len: usize) -> Option<String> {
    let value = fields.remove(key)?;
    let text = value.as_str()?;
    let valid = text.len() == len
        && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        && text.bytes().any(|b| b != b'0');
    valid.then(|| text.to_string())
}

fn is_error(fields: &Map<String, Value>) -> bool {
    fields.contains_key("error")
        || fields
            .get(STATUS_FIELD)
            .and_then(Value::as_u64)
            .is_some_and(|s| s >= 500)
}

impl<S> tracing_subscriber::Layer<S> for OtlpLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some((name, kind)) = kind_of(attrs.metadata().name()) else {
            return;
        };
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut fields = JsonFieldVisitor::default();
        attrs.record(&mut fields);
        let mut fields = fields.0;
        let inherited = span.scope().skip(1).find_map(|ancestor| {
            ancestor
                .extensions()
                .get::<Open>()
                .map(|open| (open.record.trace_id.clone(), open.record.span_id.clone()))
        });
        let trace_id = take_id(&mut fields, TRACE_ID, 32);
        let parent = take_id(&mut fields, PARENT_SPAN_ID, 16);
        let span_id = take_id(&mut fields, SPAN_ID, 16).unwrap_or_else(new_span_id);
        let (trace_id, parent_span_id) = match (trace_id, inherited) {
            (Some(trace_id), _) => (trace_id, parent.unwrap_or_default()),
            (None, Some((trace_id, parent_id))) => (trace_id, parent_id),
            (None, None) => (format!("{}{}", new_span_id(), new_span_id()), String::new()),
        };
        let now = SystemTime::now();
        span.extensions_mut().insert(Open {
            record: SpanRecord {
                trace_id,
                span_id,
                parent_span_id,
                name,
                kind,
                start: now,
                end: now,
                attributes: fields,
                error: false,
            },
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        let Some(open) = extensions.get_mut::<Open>() else {
            return;
        };
        let mut fields = JsonFieldVisitor(std::mem::take(&mut open.record.attributes));
        values.record(&mut fields);
        open.record.attributes = fields.0;
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        let mut record = open.record;
        record.end = SystemTime::now();
        record.error = is_error(&record.attributes);
        self.exporter.send(record);
    }
}

#[cfg(test)]
#[path = "layer_tests.rs"]
mod tests;
