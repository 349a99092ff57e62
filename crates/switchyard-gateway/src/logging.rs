//! Log output: human-readable text, or one JSON object per line for log pipelines
//! (`--log-format json`). The JSON form is written here on top of `serde_json` rather than
//! with tracing-subscriber's `json` feature, which would pull in another crate.
//!
//! A JSON line: `{"timestamp","level","target","message",<event fields>,"request_id"?,
//! "spans":[{"name",<span fields>}]}`; the request id of the enclosing request span is
//! lifted to the top level so every line of a request can be found by it.

use serde_json::{Map, Value};
use std::fmt;
use tracing::{Event, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use crate::log_fields::PlainFields;
use crate::telemetry::{Exporter, JsonFieldVisitor, OtlpLayer};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Installs the global subscriber: `RUST_LOG` filter (default `info`), to stderr; with an
/// exporter, the request path's spans also go to OTLP (whatever `RUST_LOG` says).
pub fn init(format: LogFormat, otlp: Option<Exporter>) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let spans = otlp.map(|exporter| {
        OtlpLayer::new(exporter).with_filter(
            tracing_subscriber::filter::filter_fn(OtlpLayer::exports)
                .with_max_level_hint(tracing::Level::DEBUG),
        )
    });
    match spans {
        Some(spans) => tracing_subscriber::registry()
            .with(lines(format).with_filter(filter))
            .with(spans)
            .init(),
        // The log lines alone: their filter is the whole subscriber's. As a per-layer filter
        // it would cost every entry into and exit from a span a look-up of the layers the
        // span is enabled for, and the request span is entered on every poll.
        None => tracing_subscriber::registry()
            .with(filter)
            .with(lines(format))
            .init(),
    }
}

/// The log lines to stderr, in `format`.
fn lines<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Text if std::io::IsTerminal::is_terminal(&std::io::stderr()) => {
            lines.with_ansi(true).boxed()
        }
        // The same text as the default field formatter writes without colours, for less.
        LogFormat::Text => lines.with_ansi(false).fmt_fields(PlainFields).boxed(),
        LogFormat::Json => lines
            .with_ansi(false)
            .fmt_fields(JsonFields)
            .event_format(JsonLines)
            .boxed(),
    }
}

/// Span fields kept as JSON object text, merged when a span records more fields later.
pub struct JsonFields;

impl<'writer> FormatFields<'writer> for JsonFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        let mut visitor = JsonFieldVisitor::default();
        fields.record(&mut visitor);
        write!(writer, "{}", Value::Object(visitor.0))
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut visitor = JsonFieldVisitor(parse_object(&current.fields));
        fields.record(&mut visitor);
        current.fields = Value::Object(visitor.0).to_string();
        Ok(())
    }
}

fn parse_object(text: &str) -> Map<String, Value> {
    match serde_json::from_str(text) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    }
}

/// One JSON object per event.
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), timestamp.into());
        line.insert("level".into(), event.metadata().level().as_str().into());
        line.insert("target".into(), event.metadata().target().into());
        let mut fields = JsonFieldVisitor::default();
        event.record(&mut fields);
        let mut spans = Vec::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let mut object = span
                    .extensions()
                    .get::<FormattedFields<N>>()
                    .map(|f| parse_object(&f.fields))
                    .unwrap_or_default();
                if let Some(id) = object.get("request_id") {
                    line.insert("request_id".into(), id.clone());
                }
                object.insert("name".into(), span.name().into());
                spans.push(Value::Object(object));
            }
        }
        for (key, value) in fields.0 {
            line.entry(key).or_insert(value);
        }
        if !spans.is_empty() {
            line.insert("spans".into(), Value::Array(spans));
        }
        writeln!(writer, "{}", Value::Object(line))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// A log writer the tests read back (clones share the bytes).
    #[derive(Clone, Default)]
    pub(crate) struct Buffer(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn json_lines_carry_event_fields_spans_and_the_request_id() {
        let buffer = Buffer::default();
        let sink = buffer.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || sink.clone())
            .with_ansi(false)
            .fmt_fields(JsonFields)
            .event_format(JsonLines)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!(
                "request",
                request_id = "req-7",
                caller = tracing::field::Empty
            );
            let _entered = span.enter();
            span.record("caller", "team-a");
            tracing::info!(worker = "sim-0", attempts = 2u64, "forwarded");
        });
        let text = String::from_utf8(buffer.0.lock().expect("lock").clone()).expect("utf8");
        let line: Value = serde_json::from_str(text.trim()).expect("one JSON object");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["message"], "forwarded");
        assert_eq!(line["worker"], "sim-0");
        assert_eq!(line["attempts"], 2);
        assert_eq!(line["request_id"], "req-7");
        assert_eq!(line["spans"][0]["name"], "request");
        assert_eq!(
            line["spans"][0]["caller"], "team-a",
            "a field recorded later is merged"
        );
        assert!(line["timestamp"].as_str().is_some_and(|t| t.contains('T')));
    }
}
