#![allow(clippy::unwrap_used, clippy::expect_used)]
//! SIGTERM to the real `switchyard` binary while 50 streams are in flight: readiness turns
//! off at once, new requests are refused after the accept window, every stream finishes
//! whole, then the process exits 0.

mod common;

use common::*;
use http_body_util::BodyExt;
use std::time::Duration;
use switchyard_sim::SimWorker;

const STREAMS: usize = 50;
/// 1200 tokens at 5 ms each: every stream lasts about six seconds.
const STREAM_TOKENS: u64 = 1200;

async fn roomy_sims() -> Vec<SimWorker> {
    start_sims_with(2, |config| config.max_running = STREAMS).await
}

async fn ready_status(base: &str) -> Option<(u16, String)> {
    let request = http::Request::get(format!("{base}/ready"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(5), client().request(request))
        .await
        .ok()?
        .ok()?;
    let status = response.status().as_u16();
    let body = response.into_body().collect().await.ok()?.to_bytes();
    Some((status, String::from_utf8_lossy(&body).into_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_fifty_streams_with_readiness_off() {
    let sims = roomy_sims().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.toml");
    std::fs::write(
        &path,
        "[server]\nshutdown_accept_ms = 1000\nshutdown_grace_ms = 60000\n",
    )
    .unwrap();
    let mut args = vec![
        "--config",
        path.to_str().unwrap(),
        "--policy",
        "round_robin",
    ];
    let urls: Vec<String> = sims.iter().map(|s| s.base_url()).collect();
    for url in &urls {
        args.extend(["--worker-url", url.as_str()]);
    }
    let mut gateway = GatewayProcess::spawn(&args).await;
    let base = gateway.base_url.clone();
    assert!(
        eventually(Duration::from_secs(20), || async {
            ready_status(&base).await.is_some_and(|(s, _)| s == 200)
        })
        .await,
        "the gateway never became ready"
    );

    // Open every stream and see its first bytes, so all 50 are in flight at the signal.
    let mut bodies = Vec::new();
    for i in 0..STREAMS {
        let mut request = chat("sim-llama", &format!("story number {i}"), true);
        request["max_tokens"] = STREAM_TOKENS.into();
        let response = open_chat(&base, &request).await;
        assert_eq!(response.status(), 200);
        bodies.push(response.into_body());
    }
    let readers: Vec<_> = bodies
        .into_iter()
        .map(|mut body| {
            tokio::spawn(async move {
                let mut text = String::new();
                while let Some(frame) = body.frame().await {
                    let frame = frame.map_err(|e| format!("stream cut: {e}"))?;
                    if let Some(data) = frame.data_ref() {
                        text.push_str(&String::from_utf8_lossy(data));
                    }
                }
                Ok::<String, String>(text)
            })
        })
        .collect();

    let pid = gateway.child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());

    // Readiness turns off at once, while the streams are still running.
    let mut draining_seen = false;
    for _ in 0..100 {
        if let Some((503, body)) = ready_status(&base).await {
            assert!(body.contains("draining"), "{body}");
            draining_seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(draining_seen, "/ready never answered 503 after SIGTERM");
    let finished = readers.iter().filter(|r| r.is_finished()).count();
    assert_eq!(finished, 0, "streams ended before readiness turned off");

    // After the accept window new requests are refused, readiness stays off, streams go on.
    let refused = eventually(Duration::from_secs(5), || async {
        let reply = post_json(
            &format!("{base}/v1/chat/completions"),
            &chat("sim-llama", "too late", false),
        )
        .await;
        reply.status == 503 && reply.error_code() == "shutting_down"
    })
    .await;
    assert!(refused, "new requests were not refused during the drain");
    let (status, _) = ready_status(&base)
        .await
        .expect("ready answers during drain");
    assert_eq!(status, 503);
    let finished = readers.iter().filter(|r| r.is_finished()).count();
    assert!(
        finished < STREAMS,
        "every stream ended before the refusal could be observed: no drain was shown"
    );

    for reader in readers {
        let text = reader.await.unwrap().expect("stream cut during the drain");
        assert!(
            text.trim_end().ends_with("data: [DONE]"),
            "stream did not finish: ...{}",
            &text[text.len().saturating_sub(200)..]
        );
        let usage = text
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter(|l| *l != "[DONE]")
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .find(|v| v.get("usage").is_some_and(|u| !u.is_null()))
            .expect("usage chunk");
        assert_eq!(usage["usage"]["completion_tokens"], STREAM_TOKENS);
    }

    let exit = tokio::time::timeout(Duration::from_secs(30), gateway.child.wait())
        .await
        .expect("the gateway did not exit after draining")
        .unwrap();
    assert!(exit.success(), "exit status {exit:?}");
}
