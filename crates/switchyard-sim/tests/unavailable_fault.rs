//! The `unavailable` fault over HTTP: every faultable path answers 503 until the fault ends.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use http::StatusCode;
use serde_json::json;

#[tokio::test]
async fn unavailable_answers_503_everywhere_but_control_paths_until_cleared() {
    let worker = start(fast_config()).await;
    let client = client();
    let base = worker.base_url();
    let fault = json!({"mode": "unavailable", "for_ms": 3_600_000});
    let (status, shown) = send_json(&client, post(&format!("{base}/admin/fault"), &fault)).await;
    assert_eq!((status, shown), (StatusCode::OK, fault));

    let (status, body) = send_json(
        &client,
        post(
            &format!("{base}/v1/chat/completions"),
            &chat_body("x", 2, false),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"]["code"], "service_unavailable");
    assert_eq!(body["error"]["type"], "server_error");
    let (status, _, _) = send(&client, get(&format!("{base}/health"))).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "health too");
    metrics_text(&client, &base).await;

    let bad = json!({"mode": "unavailable", "for_ms": 0});
    let (status, _) = send_json(&client, post(&format!("{base}/admin/fault"), &bad)).await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "a zero lifetime is refused"
    );

    send_json(
        &client,
        post(&format!("{base}/admin/fault"), &json!({"mode": "ok"})),
    )
    .await;
    let (status, _) = send_json(
        &client,
        post(
            &format!("{base}/v1/chat/completions"),
            &chat_body("x", 2, false),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(worker.stats().requests_completed, 1);
}
