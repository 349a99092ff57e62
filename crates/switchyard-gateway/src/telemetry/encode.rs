//! Finished spans and their OTLP/JSON form (`ExportTraceServiceRequest`): ids as lowercase
//! hex, times as decimal-string nanoseconds since the epoch, attributes as typed values.

use serde_json::{Map, Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

/// OTLP `SpanKind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpanKind {
    Internal = 1,
    Server = 2,
    Client = 3,
}

/// A finished span, ready to export.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    pub name: &'static str,
    pub kind: SpanKind,
    pub start: SystemTime,
    pub end: SystemTime,
    pub attributes: Map<String, Value>,
    pub error: bool,
}

fn nanos(time: SystemTime) -> String {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
        .to_string()
}

fn any_value(value: &Value) -> Value {
    match value {
        Value::Bool(b) => json!({"boolValue": b}),
        // OTLP/JSON writes 64-bit integers as strings.
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({"intValue": n.to_string()}),
        Value::Number(n) => json!({"doubleValue": n.as_f64().unwrap_or(0.0)}),
        Value::String(s) => json!({"stringValue": s}),
        other => json!({"stringValue": other.to_string()}),
    }
}

fn attributes(map: &Map<String, Value>) -> Vec<Value> {
    map.iter()
        .map(|(key, value)| json!({"key": key, "value": any_value(value)}))
        .collect()
}

impl SpanRecord {
    fn to_json(&self) -> Value {
        let mut span = json!({
            "traceId": self.trace_id,
            "spanId": self.span_id,
            "name": self.name,
            "kind": self.kind as u8,
            "startTimeUnixNano": nanos(self.start),
            "endTimeUnixNano": nanos(self.end.max(self.start)),
            "attributes": attributes(&self.attributes),
            // STATUS_CODE_ERROR = 2; unset otherwise.
            "status": if self.error { json!({"code": 2}) } else { json!({}) },
        });
        if !self.parent_span_id.is_empty() {
            span["parentSpanId"] = self.parent_span_id.clone().into();
        }
        span
    }
}

/// One export request carrying `spans` of one service.
pub fn export_request(service_name: &str, spans: &[SpanRecord]) -> Value {
    json!({
        "resourceSpans": [{
            "resource": {"attributes": [
                {"key": "service.name", "value": {"stringValue": service_name}},
                {"key": "service.version", "value": {"stringValue": env!("CARGO_PKG_VERSION")}},
            ]},
            "scopeSpans": [{
                "scope": {"name": "switchyard-gateway", "version": env!("CARGO_PKG_VERSION")},
                "spans": spans.iter().map(SpanRecord::to_json).collect::<Vec<_>>(),
            }],
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn spans_are_written_in_the_otlp_json_shape() {
        let start = UNIX_EPOCH + Duration::from_nanos(1_700_000_000_123_456_789);
        let mut attributes = Map::new();
        attributes.insert("worker".into(), "sim-0".into());
        attributes.insert("attempt".into(), 2.into());
        attributes.insert("retry".into(), true.into());
        attributes.insert("ratio".into(), 0.5.into());
        let record = SpanRecord {
            trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
            span_id: "00f067aa0ba902b7".into(),
            parent_span_id: String::new(),
            name: "attempt",
            kind: SpanKind::Client,
            start,
            end: start + Duration::from_millis(5),
            attributes,
            error: true,
        };
        let body = export_request("gw", &[record]);
        let resource = &body["resourceSpans"][0];
        assert_eq!(
            resource["resource"]["attributes"][0]["value"]["stringValue"],
            "gw"
        );
        let span = &resource["scopeSpans"][0]["spans"][0];
        assert_eq!(span["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(span["kind"], 3);
        assert_eq!(span["startTimeUnixNano"], "1700000000123456789");
        assert_eq!(span["endTimeUnixNano"], "1700000000128456789");
        assert!(span.get("parentSpanId").is_none(), "a root has no parent");
        assert_eq!(span["status"]["code"], 2);
        let attribute = |key: &str| {
            span["attributes"]
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["key"] == key)
                .unwrap()["value"]
                .clone()
        };
        assert_eq!(attribute("worker"), json!({"stringValue": "sim-0"}));
        assert_eq!(attribute("attempt"), json!({"intValue": "2"}));
        assert_eq!(attribute("retry"), json!({"boolValue": true}));
        assert_eq!(attribute("ratio"), json!({"doubleValue": 0.5}));
    }
}
