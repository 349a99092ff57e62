#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The transport's reading of a replica's answers, against a scripted HTTP server on
//! loopback: what a business request spent, which failures are definite and which unknown.

use jepsen_like_tests::cluster::Endpoint;
use jepsen_like_tests::history::{Op, OpResult};
use jepsen_like_tests::switchyard::{Credentials, SwitchyardTransport};
use jepsen_like_tests::workload::{Completion, MixConfig, OpTransport};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{Priority, Purpose};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Answers every connection with `response` (raw HTTP), or closes it unanswered if `None`.
async fn scripted(response: Option<String>) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut buf = vec![0u8; 8192];
            let _ = stream.read(&mut buf).await;
            if let Some(response) = &response {
                let _ = stream.write_all(response.as_bytes()).await;
            }
        }
    });
    (addr, task)
}

fn http(status: &str, headers: &[(&str, &str)], body: &str) -> String {
    let mut text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text
}

fn spend() -> Op {
    Op::Spend {
        caller: "alice".into(),
        purpose: Purpose::Business,
        priority: Priority::P1,
        max_tokens: 60,
    }
}

async fn answer(response: Option<String>, op: Op) -> Completion {
    let (addr, task) = scripted(response).await;
    let credentials = Arc::new(Credentials::for_mix(&MixConfig::default()));
    let transport = SwitchyardTransport::new(credentials, "sim-llama", Duration::from_secs(2));
    let endpoint = Endpoint {
        node: 1,
        client_addr: addr,
    };
    let completion = transport.execute(&endpoint, &op).await;
    task.abort();
    completion
}

const USAGE: &str = r#"{"usage":{"prompt_tokens":7,"completion_tokens":266,"total_tokens":273}}"#;

#[tokio::test]
async fn a_served_request_spends_its_usage_and_a_cached_answer_spends_nothing() {
    let served = answer(Some(http("200 OK", &[], USAGE)), spend()).await;
    assert_eq!(
        served,
        Completion::Ok(OpResult::Spent {
            tokens: 273,
            override_id: None
        })
    );
    let cached = http("200 OK", &[("x-switchyard-degraded", "cache")], USAGE);
    assert_eq!(
        answer(Some(cached), spend()).await,
        Completion::Ok(OpResult::Spent {
            tokens: 0,
            override_id: None
        }),
        "the cache fallback bypasses admission"
    );
}

#[tokio::test]
async fn refusals_are_definite_and_silence_is_unknown() {
    let body = r#"{"error":{"code":"budget_exhausted","message":"exhausted"}}"#;
    match answer(Some(http("429 Too Many Requests", &[], body)), spend()).await {
        Completion::Fail(e) => assert_eq!(
            (e.reason.as_str(), e.status),
            ("budget_exhausted", Some(429))
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(answer(None, spend()).await, Completion::Info(_)),
        "closed mid-request"
    );
    let unanswered = {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        listener.local_addr().unwrap()
    };
    let credentials = Arc::new(Credentials::for_mix(&MixConfig::default()));
    let transport = SwitchyardTransport::new(credentials, "sim-llama", Duration::from_secs(2));
    let refused = transport
        .execute(
            &Endpoint {
                node: 1,
                client_addr: unanswered,
            },
            &spend(),
        )
        .await;
    assert!(
        matches!(&refused, Completion::Fail(e) if e.reason == "connection_refused"),
        "nothing listens: {refused:?}"
    );
}

#[tokio::test]
async fn an_admin_write_answered_503_may_have_happened() {
    let body = r#"{"error":{"code":"quota_ledger_unreachable","message":"no leader"}}"#;
    let op = Op::ApproveOverride {
        id: 3,
        approver: "ops-ben".into(),
    };
    let completion = answer(Some(http("503 Service Unavailable", &[], body)), op).await;
    assert!(matches!(completion, Completion::Info(e) if e.status == Some(503)));
    let listing = answer(
        Some(http("503 Service Unavailable", &[], body)),
        Op::ListOverrides,
    )
    .await;
    assert!(
        matches!(listing, Completion::Fail(_)),
        "a read has no effect"
    );
}
