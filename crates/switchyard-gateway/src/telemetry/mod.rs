//! OpenTelemetry traces over OTLP/HTTP (opt-in, `--otlp-endpoint`): the request path's spans
//! (`request`, `admit`, `select`, `attempt`, `stream`) become OTLP spans, batched and posted
//! as OTLP/JSON to a collector.
//!
//! Written on `tracing` and `serde_json` rather than the opentelemetry crates: the export is a
//! few hundred lines, and those crates would add an SDK, a runtime adapter and an HTTP stack
//! next to the ones the gateway already has.
//!
//! `layer` (spans → records, trace ids from the request's W3C context, the attempt's span id
//! the one forwarded in `traceparent`), `export` (bounded queue, batches, the collector
//! client on its own thread, counted drops), `encode` (OTLP/JSON).

mod encode;
mod export;
mod fields;
mod ids;
mod layer;

pub use export::{Exporter, OtlpOptions, TelemetryCounters, counters};
pub(crate) use fields::JsonFieldVisitor;
pub use ids::{SpanId, new_span_id};
pub use layer::{EXPORTED_SPANS, OtlpLayer, exports_spans};
