//! Event and span fields collected into a JSON object: the log lines and the exported spans
//! read them the same way.

use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};

/// Collects fields into a JSON object; a `Debug`-only value becomes its `{:?}` text.
#[derive(Default)]
pub(crate) struct JsonFieldVisitor(pub(crate) Map<String, Value>);

impl Visit for JsonFieldVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}").into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.into());
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_string(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_string(), value.into());
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_string(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_string(), value.into());
    }
}
