use super::*;
use crate::telemetry::export::Message;
use tracing_subscriber::layer::SubscriberExt;

fn finished(queue: &mut tokio::sync::mpsc::Receiver<Message>) -> Vec<SpanRecord> {
    let mut spans = Vec::new();
    while let Ok(message) = queue.try_recv() {
        if let Message::Span(span) = message {
            spans.push(*span);
        }
    }
    spans
}

#[test]
fn request_stages_share_the_trace_and_the_attempt_keeps_its_forwarded_id() {
    let (exporter, mut queue) = Exporter::channel(64);
    let subscriber = tracing_subscriber::registry().with(OtlpLayer::new(exporter));
    tracing::subscriber::with_default(subscriber, || {
        let request = tracing::info_span!(
            target: "switchyard_gateway::proxy",
            "request",
            request_id = "req-1",
            trace_id = "4bf92f3577b34da6a3ce929d0e0e4736",
            parent_span_id = "00f067aa0ba902b7",
            status = tracing::field::Empty,
        );
        {
            let _in = request.enter();
            tracing::info_span!(target: "switchyard_gateway::proxy", "admit", priority = 1u64)
                .in_scope(|| {});
            let attempt = tracing::info_span!(
                target: "switchyard_gateway::proxy",
                "attempt",
                worker = "sim-0",
                span_id = "a1b2c3d4e5f60718",
            );
            attempt.in_scope(|| {
                // Not one of ours: not exported, and its children still find the trace.
                tracing::info_span!(target: "hyper", "connect").in_scope(|| {});
            });
            drop(attempt);
            request.record("status", 502u64);
        }
        drop(request);
    });
    let spans = finished(&mut queue);
    let names: Vec<&str> = spans.iter().map(|s| s.name).collect();
    assert_eq!(names, ["admit", "attempt", "request"]);
    let by_name = |n: &str| spans.iter().find(|s| s.name == n).unwrap();
    let request = by_name("request");
    assert_eq!(request.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(
        request.parent_span_id, "00f067aa0ba902b7",
        "the client's span"
    );
    assert_eq!(request.kind, SpanKind::Server);
    assert!(request.error, "status 502 ends the span in error");
    assert_eq!(request.attributes["request_id"], "req-1");
    assert!(
        !request.attributes.contains_key("trace_id"),
        "ids are not attributes"
    );
    let attempt = by_name("attempt");
    assert_eq!(attempt.span_id, "a1b2c3d4e5f60718");
    assert_eq!(attempt.parent_span_id, request.span_id);
    assert_eq!(attempt.trace_id, request.trace_id);
    assert_eq!(attempt.kind, SpanKind::Client);
    assert!(!attempt.error);
    let admit = by_name("admit");
    assert_eq!(admit.parent_span_id, request.span_id);
    assert_eq!(admit.attributes["priority"], 1);
    assert!(admit.start >= request.start && admit.end <= request.end);
}

#[test]
fn a_root_without_ids_gets_a_fresh_trace_and_bad_ids_are_ignored() {
    let (exporter, mut queue) = Exporter::channel(8);
    let subscriber = tracing_subscriber::registry().with(OtlpLayer::new(exporter));
    tracing::subscriber::with_default(subscriber, || {
        tracing::info_span!(target: "switchyard_gateway::x", "request").in_scope(|| {});
        tracing::info_span!(
            target: "switchyard_gateway::x",
            "request",
            trace_id = "00000000000000000000000000000000"
        )
        .in_scope(|| {});
    });
    let spans = finished(&mut queue);
    assert_eq!(spans.len(), 2);
    for span in &spans {
        assert_eq!(span.trace_id.len(), 32);
        assert_ne!(span.trace_id, "00000000000000000000000000000000");
        assert!(span.parent_span_id.is_empty());
    }
    assert_ne!(spans[0].trace_id, spans[1].trace_id);
}
