#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The W3C `traceparent` reaches the worker: the client's trace id kept, or one made from the
//! request id when the client sent none.

mod common;

use common::*;
use http::Method;

fn traceparent_of(head: &str) -> String {
    head.lines()
        .find_map(|l| l.strip_prefix("traceparent:"))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| panic!("no traceparent forwarded: {head}"))
}

#[tokio::test]
async fn traceparent_is_forwarded_or_generated() {
    let worker = CaptureWorker::start((3, 2)).await;
    let mut config = config_for(&[], "round_robin");
    config.workers = vec![worker.spec("w")];
    let gateway = switchyard_gateway::start(config, None).await.unwrap();
    let url = format!("{}/v1/chat/completions", gateway.base_url());
    let body = chat("sim-llama", "hi", false).to_string();

    let client_parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let reply = send(
        Method::POST,
        &url,
        &[
            ("content-type", "application/json"),
            ("traceparent", client_parent),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let reply = send(
        Method::POST,
        &url,
        &[
            ("content-type", "application/json"),
            ("x-request-id", "6f1d2c3b-4a59-4687-9a0b-1c2d3e4f5a6b"),
        ],
        body,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.body);

    let heads = worker.heads.lock().clone();
    let forwarded: Vec<String> = heads
        .iter()
        .filter(|h| h.starts_with("post "))
        .map(|h| traceparent_of(h))
        .collect();
    assert_eq!(forwarded.len(), 2, "{heads:?}");
    let first: Vec<&str> = forwarded[0].split('-').collect();
    assert_eq!(
        first[1], "4bf92f3577b34da6a3ce929d0e0e4736",
        "client trace id kept"
    );
    assert_ne!(
        first[2], "00f067aa0ba902b7",
        "the gateway's attempt is a new parent"
    );
    assert_eq!(first[3], "01");
    let second: Vec<&str> = forwarded[1].split('-').collect();
    assert_eq!(second[0], "00");
    assert_eq!(
        second[1], "6f1d2c3b4a5946879a0b1c2d3e4f5a6b",
        "trace id from the request id"
    );
    assert_eq!(second[2].len(), 16);
    gateway.shutdown().await;
}
