//! Every kind of field, in spans and events, is written as `DefaultFields` writes it.

use super::*;
use crate::logging::tests::Buffer;
use proptest::prelude::*;

#[derive(Debug)]
struct Failure {
    what: &'static str,
    source: Option<Box<Failure>>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.what)
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// The log text `emit` produces through `fields` (no time, no colours).
fn text<N>(fields: N, emit: &dyn Fn()) -> String
where
    N: for<'w> FormatFields<'w> + Send + Sync + 'static,
{
    let buffer = Buffer::default();
    let sink = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .without_time()
        .with_max_level(tracing::Level::TRACE)
        .fmt_fields(fields)
        .finish();
    tracing::subscriber::with_default(subscriber, emit);
    let bytes = buffer.0.lock().map(|b| b.clone()).unwrap_or_default();
    String::from_utf8(bytes).unwrap()
}

fn same_as_default(emit: &dyn Fn()) -> Result<String, TestCaseError> {
    let expected = text(DefaultFields::new(), emit);
    let got = text(PlainFields, emit);
    prop_assert_eq!(&got, &expected);
    Ok(got)
}

#[test]
fn spans_and_events_of_every_field_kind_read_as_the_default_writes_them() {
    let emit = || {
        let span = tracing::info_span!(
            "request",
            request_id = %"3f2b-9a",
            route = "chat_completions",
            status = tracing::field::Empty,
            caller = Some("team-a"),
            absent = None::<&str>,
        );
        let _entered = span.enter();
        span.record("status", 200u16);
        let inner = tracing::info_span!("attempt", r#type = "first", n = 1u64);
        let _inner = inner.enter();
        tracing::info!(
            worker = "sim-0",
            quoted = "say \"hi\"\\ now\n\t\u{1b}[31mred é ☃",
            empty = "",
            count = -3i64,
            big = u128::MAX,
            ratio = 0.5f64,
            flag = true,
            debug = ?vec!["a", "b"],
            shown = %"display \"as is\"",
            r#loop = "raw",
            "log.target" = "metadata",
            bytes = &b"\x00ab"[..],
            "forwarded {} times",
            2
        );
        let error = Failure {
            what: "outer",
            source: Some(Box::new(Failure {
                what: "inner \u{1b}[0m",
                source: None,
            })),
        };
        tracing::warn!(
            error = &error as &(dyn std::error::Error + 'static),
            plain = "after"
        );
        let lone = Failure {
            what: "lone",
            source: None,
        };
        tracing::error!(error = &lone as &(dyn std::error::Error + 'static));
        tracing::info!(message = "explicit \u{1b} message", after = 1);
        tracing::info!("log.first" = "x", then = "y");
        tracing::debug!("only a message with \"quotes\"");
    };
    let got = same_as_default(&emit).unwrap();
    assert!(
        got.contains(r#"route="chat_completions" caller="team-a""#),
        "{got}"
    );
    assert!(
        got.contains(
            r#"request{request_id=3f2b-9a route="chat_completions" caller="team-a" status=200}"#
        ),
        "{got}"
    );
}

proptest! {
    #[test]
    fn any_text_reads_as_the_default_writes_it(
        value in ".{0,24}",
        message in ".{0,12}",
        number in any::<i64>(),
    ) {
        let emit = || {
            let span = tracing::info_span!("request", caller = tracing::field::Empty, id = %value);
            let _entered = span.enter();
            span.record("caller", value.as_str());
            tracing::info!(text = value.as_str(), number, "{message}");
            tracing::info!(message = value.as_str(), text = message.as_str());
        };
        same_as_default(&emit)?;
    }
}

/// A value that logs while it is being formatted.
struct Chatty;

impl fmt::Debug for Chatty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        tracing::info!(inside = "yes", "formatting");
        f.write_str("chatty")
    }
}

#[test]
fn a_field_that_logs_while_it_is_written_reads_as_the_default_writes_it() {
    let emit = || {
        let span = tracing::info_span!("request", first = "one", chatty = ?Chatty, last = 3u64);
        let _entered = span.enter();
        tracing::info!(before = "x", chatty = ?Chatty, after = "y", "done");
    };
    // The dispatcher drops an event raised inside a subscriber's own callback, so the line
    // reads as the default writes it, without the inner event.
    let got = same_as_default(&emit).unwrap();
    assert!(got.contains(r#"first="one" chatty=chatty last=3"#), "{got}");
    assert!(
        got.contains(r#"before="x" chatty=chatty after="y""#),
        "{got}"
    );
}

#[test]
fn a_long_field_is_written_whole_and_the_next_line_reads_alike() {
    let long = "w".repeat(3 * super::SCRATCH_KEPT);
    let emit = || {
        tracing::info!(text = long.as_str(), "long");
        tracing::info!(text = "short", "then");
    };
    let got = same_as_default(&emit).unwrap();
    assert!(got.contains(&long), "the whole field");
}
