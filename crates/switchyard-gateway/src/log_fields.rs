//! Text log fields without colours, formatted exactly as tracing-subscriber's `DefaultFields`
//! formats them (`name=value`, one space apart, strings quoted and escaped as `Debug` does),
//! for less: the default writes each name and `=` through a styling wrapper and the
//! formatting machinery even when styling is off, and escapes strings character by
//! character. Every request's span pays that for each of its fields. Fields the default
//! treats specially (`message`, raw identifiers, `log.` metadata, errors) are handed to it.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use tracing::field::{Field, Visit};
use tracing_subscriber::field::{RecordFields, VisitOutput};
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::{DefaultFields, DefaultVisitor, Writer};

/// `DefaultFields` for a writer without ANSI colours.
#[derive(Debug, Default)]
pub struct PlainFields;

impl<'writer> FormatFields<'writer> for PlainFields {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'writer>, fields: R) -> fmt::Result {
        // Styled or unsanitised output is the default's alone to write.
        if writer.has_ansi_escapes() || !writer.sanitizes_ansi_escapes() {
            return DefaultFields::new().format_fields(writer, fields);
        }
        // Written to a buffer of this thread's first, then to `writer` at once: the span's
        // text would otherwise grow from empty a few bytes at a time, reallocating as it
        // goes. A field whose formatting logs finds the buffer in use and gets its own.
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut out) => format_plain(&mut out, writer, fields),
            Err(_) => format_plain(&mut String::new(), writer, fields),
        })
    }
}

thread_local! {
    static SCRATCH: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A buffer that grew past this is dropped after use rather than kept by the thread.
const SCRATCH_KEPT: usize = 4096;

fn format_plain<R: RecordFields>(
    out: &mut String,
    mut writer: Writer<'_>,
    fields: R,
) -> fmt::Result {
    out.clear();
    let mut visitor = PlainVisitor {
        out: &mut *out,
        is_empty: true,
        result: Ok(()),
    };
    fields.record(&mut visitor);
    let result = visitor.result.and_then(|()| writer.write_str(out));
    if out.capacity() > SCRATCH_KEPT {
        *out = String::new();
    }
    result
}

struct PlainVisitor<'a> {
    out: &'a mut String,
    /// Nothing written yet (no separating space before the next field).
    is_empty: bool,
    result: fmt::Result,
}

/// A field the default writes as `name=` and the value's `Debug`, nothing else.
fn is_plain(name: &str) -> bool {
    name != "message" && !name.starts_with("r#") && !name.starts_with("log.")
}

/// Whether `Debug` prints `text` as itself between quotes: printable ASCII but `"` and `\`.
fn needs_no_escape(text: &str) -> bool {
    text.bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\')
}

impl PlainVisitor<'_> {
    fn pad(&mut self) -> fmt::Result {
        if self.is_empty {
            self.is_empty = false;
            Ok(())
        } else {
            self.out.write_char(' ')
        }
    }

    fn name(&mut self, field: &Field) -> fmt::Result {
        self.pad()?;
        self.out.write_str(field.name())?;
        self.out.write_char('=')
    }

    /// One field as the default writes it, to a buffer first: it skips `log.` metadata
    /// (with tracing-log), and then no separating space is due either. Anything else it
    /// separates, even an empty message.
    fn by_default(&mut self, field: &Field, record: impl FnOnce(&mut DefaultVisitor<'_>)) {
        let mut text = String::new();
        let mut visitor = DefaultVisitor::new(Writer::new(&mut text), true);
        record(&mut visitor);
        self.result = visitor.finish().and_then(|()| {
            if text.is_empty() && field.name().starts_with("log.") {
                return Ok(());
            }
            self.pad()?;
            self.out.write_str(&text)
        });
    }
}

impl Visit for PlainVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.result.is_err() {
            return;
        }
        if !is_plain(field.name()) {
            return self.by_default(field, |v| v.record_str(field, value));
        }
        self.result = self.name(field).and_then(|()| {
            if needs_no_escape(value) {
                self.out.write_char('"')?;
                self.out.write_str(value)?;
                self.out.write_char('"')
            } else {
                write!(self.out, "{value:?}")
            }
        });
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.result.is_err() {
            return;
        }
        self.by_default(field, |v| v.record_error(field, value));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() {
            return;
        }
        if !is_plain(field.name()) {
            return self.by_default(field, |v| v.record_debug(field, value));
        }
        self.result = self
            .name(field)
            .and_then(|()| write!(self.out, "{value:?}"));
    }
}

#[cfg(test)]
#[path = "log_fields_tests.rs"]
mod tests;
