#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Admin API (add/remove workers, key checks) and the operational endpoints.

mod common;

use common::*;
use http::Method;
use std::time::Duration;

#[tokio::test]
async fn admin_is_disabled_without_a_key() {
    let sims = start_sims(1).await;
    let gateway = switchyard_gateway::start(config_for(&sims, "round_robin"), None)
        .await
        .unwrap();
    let reply = send(
        Method::GET,
        &format!("{}/admin/workers", gateway.base_url()),
        &[],
        "",
    )
    .await;
    assert_eq!(reply.status, 403);
    assert_eq!(reply.error_code(), "admin_disabled");
}

#[tokio::test]
async fn admin_add_and_remove_workers_with_and_without_the_key() {
    let sims = start_sims(2).await;
    let gateway = switchyard_gateway::start(
        config_for(&sims[..1], "round_robin"),
        Some(ADMIN_KEY.into()),
    )
    .await
    .unwrap();
    let base = gateway.base_url();
    let auth = format!("Bearer {ADMIN_KEY}");
    let add_body = serde_json::json!({"name": "late", "url": sims[1].base_url()}).to_string();

    let reply = send(
        Method::POST,
        &format!("{base}/admin/workers"),
        &[],
        add_body.clone(),
    )
    .await;
    assert_eq!(reply.status, 401);
    let reply = send(
        Method::POST,
        &format!("{base}/admin/workers"),
        &[("authorization", "Bearer wrong")],
        add_body.clone(),
    )
    .await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.json()["error"]["type"], "authentication_error");

    let reply = send(
        Method::POST,
        &format!("{base}/admin/workers"),
        &[("authorization", &auth)],
        add_body.clone(),
    )
    .await;
    assert_eq!(reply.status, 201, "{}", reply.body);
    assert_eq!(reply.json()["name"], "late");
    let reply = send(
        Method::POST,
        &format!("{base}/admin/workers"),
        &[("authorization", &auth)],
        add_body,
    )
    .await;
    assert_eq!(reply.status, 409);
    let reply = send(
        Method::POST,
        &format!("{base}/admin/workers"),
        &[("authorization", &auth)],
        r#"{"url":"not a url"}"#,
    )
    .await;
    assert_eq!(reply.status, 400);

    let reply = send(
        Method::GET,
        &format!("{base}/admin/workers"),
        &[("x-api-key", ADMIN_KEY)],
        "",
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.json()["workers"].as_array().unwrap().len(), 2);

    // Round robin over two workers: the new one takes traffic.
    let mut served = std::collections::HashSet::new();
    for _ in 0..4 {
        let reply = post_json(
            &format!("{base}/v1/chat/completions"),
            &chat("sim-llama", "hi", false),
        )
        .await;
        assert_eq!(reply.status, 200);
        served.insert(reply.header("x-switchyard-worker").unwrap().to_string());
    }
    assert!(served.contains("late"), "{served:?}");

    let reply = send(
        Method::DELETE,
        &format!("{base}/admin/workers/late"),
        &[],
        "",
    )
    .await;
    assert_eq!(reply.status, 401);
    let reply = send(
        Method::DELETE,
        &format!("{base}/admin/workers/late?wait=true"),
        &[("authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.json()["drain"]["outcome"], "idle");
    let reply = send(
        Method::DELETE,
        &format!("{base}/admin/workers/late"),
        &[("authorization", &auth)],
        "",
    )
    .await;
    assert_eq!(reply.status, 404);
    let before = sims[1].stats().requests_received;
    for _ in 0..4 {
        let reply = post_json(
            &format!("{base}/v1/chat/completions"),
            &chat("sim-llama", "hi", false),
        )
        .await;
        assert_eq!(reply.header("x-switchyard-worker"), Some("sim-0"));
    }
    assert_eq!(
        sims[1].stats().requests_received,
        before,
        "a removed worker gets nothing"
    );
}

#[tokio::test]
async fn health_ready_models_and_metrics() {
    let mut empty = config_for(&[], "cache_aware");
    empty.workers.clear();
    let gateway = switchyard_gateway::start(empty, None).await.unwrap();
    let base = gateway.base_url();
    assert_eq!(
        send(Method::GET, &format!("{base}/health"), &[], "")
            .await
            .status,
        200
    );
    assert_eq!(
        send(Method::GET, &format!("{base}/ready"), &[], "")
            .await
            .status,
        503
    );
    gateway.shutdown().await;

    let sims = start_sims(2).await;
    let gateway = switchyard_gateway::start(config_for(&sims, "cache_aware"), None)
        .await
        .unwrap();
    let base = gateway.base_url();
    assert_eq!(
        send(Method::GET, &format!("{base}/ready"), &[], "")
            .await
            .status,
        200
    );
    let listed = eventually(Duration::from_secs(5), || async {
        let models = send(Method::GET, &format!("{base}/v1/models"), &[], "")
            .await
            .json();
        models["data"]
            .as_array()
            .is_some_and(|d| d.len() == 1 && d[0]["id"] == "sim-llama")
    })
    .await;
    assert!(listed, "the union of the workers' models (deduplicated)");

    let reply = post_json(
        &format!("{base}/v1/chat/completions"),
        &chat("sim-llama", "hi", true),
    )
    .await;
    assert_eq!(reply.status, 200);
    let _ = post_json(
        &format!("{base}/v1/chat/completions"),
        &chat("nope", "hi", false),
    )
    .await;
    let metrics = send(Method::GET, &format!("{base}/metrics"), &[], "")
        .await
        .body;
    for needle in [
        "switchyard_requests_total{route=\"chat_completions\",status=\"200\"",
        "switchyard_requests_total{route=\"chat_completions\",status=\"404\",worker=\"none\"} 1",
        "switchyard_time_to_first_token_seconds_count{route=\"chat_completions\"} 1",
        "switchyard_request_duration_seconds_count{route=\"chat_completions\"} 1",
        "switchyard_in_flight_requests 0",
        "switchyard_worker_in_flight_requests{worker=\"sim-0\"} 0",
        "switchyard_routing_decisions_total{branch=\"least_loaded\",policy=\"cache_aware\"}",
        "switchyard_workers_registered 2",
        // No prompt group was planned twice: nothing moved.
        "switchyard_routing_plan_moved_ratio 0\n",
        "switchyard_routing_plan_moved_beyond_membership_change_ratio 0\n",
    ] {
        assert!(metrics.contains(needle), "missing `{needle}` in\n{metrics}");
    }
}
