use super::*;
use crate::telemetry::encode::SpanKind;
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use parking_lot::Mutex;
use serde_json::Value;
use std::sync::Arc;
use std::time::SystemTime;

fn span(n: usize) -> SpanRecord {
    SpanRecord {
        trace_id: "4bf92f3577b34da6a3ce929d0e0e4736".into(),
        span_id: format!("{:016x}", n + 1),
        parent_span_id: String::new(),
        name: "request",
        kind: SpanKind::Server,
        start: SystemTime::now(),
        end: SystemTime::now(),
        attributes: Default::default(),
        error: false,
    }
}

/// Each post's content type and body.
type Posts = Arc<Mutex<Vec<(String, Value)>>>;

/// A fake OTLP collector on loopback: records each posted body, answers `status`.
async fn collector(status: u16) -> (String, Posts) {
    let posts: Posts = Arc::default();
    let app = Router::new()
        .route(
            "/v1/traces",
            post(
                move |State(posts): State<Posts>,
                      headers: http::HeaderMap,
                      body: String| async move {
                    let content_type = headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    posts
                        .lock()
                        .push((content_type, serde_json::from_str(&body).unwrap()));
                    http::StatusCode::from_u16(status).unwrap()
                },
            ),
        )
        .with_state(posts.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, posts)
}

fn spans_in(post: &Value) -> usize {
    post["resourceSpans"][0]["scopeSpans"][0]["spans"]
        .as_array()
        .map_or(0, Vec::len)
}

#[tokio::test]
async fn spans_are_posted_in_bounded_batches_as_otlp_json() {
    let (url, posts) = collector(200).await;
    let options = OtlpOptions {
        max_batch: 3,
        service_name: "gw-test".into(),
        ..OtlpOptions::new(&url)
    };
    let exporter = Exporter::start(options).unwrap();
    for n in 0..7 {
        exporter.send(span(n));
    }
    exporter.flush(Duration::from_secs(10)).await;
    let posts = posts.lock().clone();
    let sizes: Vec<usize> = posts.iter().map(|(_, p)| spans_in(p)).collect();
    assert_eq!(sizes.iter().sum::<usize>(), 7, "{sizes:?}");
    assert!(sizes.iter().all(|n| (1..=3).contains(n)), "{sizes:?}");
    assert!(posts.iter().all(|(ct, _)| ct == "application/json"));
    assert_eq!(
        posts[0].1["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"],
        "gw-test"
    );
    assert_eq!(counters().exported.get(), 7);
    assert_eq!(
        counters()
            .dropped
            .with_label_values(&["export_failed"])
            .get(),
        0
    );
}

#[tokio::test]
async fn a_batch_the_collector_refuses_or_cannot_take_is_dropped_and_counted() {
    let (url, posts) = collector(500).await;
    let exporter = Exporter::start(OtlpOptions::new(&url)).unwrap();
    for n in 0..4 {
        exporter.send(span(n));
    }
    exporter.flush(Duration::from_secs(10)).await;
    // How the four spans are cut into batches depends on when the exporter wakes; every one
    // of them reached the collector once and was refused.
    let posted: usize = posts.lock().iter().map(|(_, p)| spans_in(p)).sum();
    assert_eq!(posted, 4);
    let failed = || {
        counters()
            .dropped
            .with_label_values(&["export_failed"])
            .get()
    };
    assert_eq!(failed(), 4);

    // Nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let exporter = Exporter::start(OtlpOptions::new(&format!("http://{closed}"))).unwrap();
    exporter.send(span(9));
    exporter.flush(Duration::from_secs(10)).await;
    assert_eq!(failed(), 5);
    assert_eq!(counters().exported.get(), 0);
}

#[tokio::test]
async fn a_full_queue_drops_new_spans_without_waiting() {
    // Nobody drains this queue of two.
    let (exporter, _queue) = Exporter::channel(2);
    let started = std::time::Instant::now();
    for n in 0..5 {
        exporter.send(span(n));
    }
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(
        counters().dropped.with_label_values(&["queue_full"]).get(),
        3
    );
}

#[test]
fn endpoints_get_the_traces_path_and_must_be_plain_http() {
    let uri = |e: &str| OtlpOptions::new(e).traces_uri();
    assert_eq!(
        uri("http://otel:4318").unwrap().to_string(),
        "http://otel:4318/v1/traces"
    );
    assert_eq!(
        uri("http://otel:4318/").unwrap().to_string(),
        "http://otel:4318/v1/traces"
    );
    assert_eq!(
        uri("http://otel:4318/custom/traces").unwrap().to_string(),
        "http://otel:4318/custom/traces"
    );
    for bad in ["https://otel:4318", "otel:4318", "grpc://otel:4317"] {
        assert!(uri(bad).unwrap_err().contains("--otlp-endpoint"), "{bad}");
    }
}
