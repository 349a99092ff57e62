#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use axum::body::{Body, Bytes};
use http::StatusCode;
use http_body_util::BodyExt;
use switchyard_workers::WorkerSpec;

const ANSWER: &str = r#"{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;

/// A worker that answers every `POST` with [`ANSWER`] and every `GET` with its one model.
async fn fixed_worker() -> String {
    let app = Router::new().fallback(|method: Method| async move {
        let body = if method == Method::POST {
            ANSWER
        } else {
            r#"{"object":"list","data":[{"id":"m","object":"model"}]}"#
        };
        ([(header::CONTENT_TYPE, "application/json")], body)
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

fn request(method: Method, uri: &str, body: &'static str) -> Request {
    http::Request::builder()
        .method(method)
        .uri(uri)
        .header(header::CONTENT_TYPE, "application/json")
        .header(crate::headers::REQUEST_ID, "req-fixed")
        .body(Body::from(body))
        .unwrap()
}

/// Status, every header in order (but the worker's `date`, which moves with its clock), and
/// the body.
async fn answer(app: &App, request: Request) -> (StatusCode, Vec<(String, Vec<u8>)>, Bytes) {
    let response = app.call(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let headers = parts
        .headers
        .iter()
        .filter(|(name, _)| *name != header::DATE)
        .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
        .collect();
    (
        parts.status,
        headers,
        body.collect().await.unwrap().to_bytes(),
    )
}

const CHAT: &str = r#"{"model":"m","messages":[{"role":"user","content":"hello"}],"max_tokens":1}"#;
const COMPLETION: &str = r#"{"model":"m","prompt":"hello","max_tokens":1}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_direct_routes_answer_as_the_router_does() {
    let mut config = crate::Config::default();
    config.server.port = 0;
    config.routing.policy = "round_robin".into();
    config.workers = vec![WorkerSpec {
        name: "w0".into(),
        url: fixed_worker().await,
        models: Some(vec!["m".into()]),
        health_path: None,
        engine: None,
    }];
    let gateway = crate::start(config, None).await.unwrap();
    let direct = App::client(Arc::clone(gateway.state()), Arc::clone(gateway.lifecycle()));
    let routed = App::router_only(direct.router.clone());
    let cases = [
        (Method::POST, "/v1/chat/completions", CHAT),
        (Method::POST, "/v1/chat/completions?trace=1", CHAT),
        (Method::POST, "/v1/completions", COMPLETION),
        (Method::POST, "/v1/chat/completions", "{not json"),
        (
            Method::POST,
            "/v1/chat/completions",
            r#"{"model":"m","messages":[]}"#,
        ),
        (Method::POST, "/v1/completions", CHAT),
        (Method::GET, "/v1/chat/completions", ""),
    ];
    let mut statuses = Vec::new();
    for (method, uri, body) in cases {
        let through_router = answer(&routed, request(method.clone(), uri, body)).await;
        let served_directly = answer(&direct, request(method.clone(), uri, body)).await;
        assert_eq!(served_directly, through_router, "{method} {uri} {body}");
        statuses.push(served_directly.0.as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 400, 400, 400, 405]);
    let answered = answer(&direct, request(Method::POST, "/v1/chat/completions", CHAT)).await;
    assert_eq!(answered.2, ANSWER.as_bytes(), "the worker's answer");
    assert!(
        answered
            .1
            .iter()
            .any(|(name, value)| name == "x-switchyard-worker" && value == b"w0"),
        "{:?}",
        answered.1
    );

    // A drain closes connections after the answer, then refuses: the same both ways.
    gateway.lifecycle().begin_drain();
    let draining = answer(&direct, request(Method::POST, "/v1/chat/completions", CHAT)).await;
    let routed_draining =
        answer(&routed, request(Method::POST, "/v1/chat/completions", CHAT)).await;
    assert_eq!(draining, routed_draining);
    assert!(
        draining
            .1
            .iter()
            .any(|(name, value)| name == "connection" && value == b"close")
    );
    gateway.lifecycle().stop_accepting();
    let refused = answer(
        &direct,
        request(Method::POST, "/v1/completions", COMPLETION),
    )
    .await;
    assert_eq!(
        refused,
        answer(
            &routed,
            request(Method::POST, "/v1/completions", COMPLETION)
        )
        .await
    );
    assert_eq!(refused.0, StatusCode::SERVICE_UNAVAILABLE);
    drop((direct, routed));
    gateway.shutdown().await;
}

#[test]
fn only_posts_to_the_exact_inference_paths_are_served_directly() {
    let route = |method: Method, uri: &str| direct_route(&request(method, uri, ""));
    assert_eq!(
        route(Method::POST, "/v1/chat/completions?x=1"),
        Some(Route::ChatCompletions)
    );
    assert_eq!(
        route(Method::POST, "/v1/completions"),
        Some(Route::Completions)
    );
    assert_eq!(route(Method::GET, "/v1/chat/completions"), None);
    assert_eq!(route(Method::HEAD, "/v1/completions"), None);
    assert_eq!(route(Method::POST, "/v1/chat/completions/"), None);
    assert_eq!(route(Method::POST, "/v1/chat%2Fcompletions"), None);
    assert_eq!(route(Method::POST, "/v1/embeddings"), None);
}
