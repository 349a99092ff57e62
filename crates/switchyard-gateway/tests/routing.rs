#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Routing through the real gateway: cache_aware keeps a conversation on one worker,
//! round_robin spreads it.

mod common;

use common::*;
use std::collections::HashSet;

/// Sends a 6-turn conversation, one request per turn, and returns the workers that served it.
async fn conversation_workers(base: &str, topic: &str) -> Vec<String> {
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": format!("You are an expert on {topic}. {}", "Answer carefully. ".repeat(30))}),
    ];
    let mut served = Vec::new();
    for turn in 0..6 {
        messages.push(serde_json::json!({"role": "user", "content": format!("question {turn} about {topic}: {}", "details ".repeat(20))}));
        let body = serde_json::json!({"model": "sim-llama", "max_tokens": 4, "messages": messages});
        let reply = post_json(&format!("{base}/v1/chat/completions"), &body).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        served.push(reply.header("x-switchyard-worker").unwrap().to_string());
        let answer = reply.json()["choices"][0]["message"]["content"].clone();
        messages.push(serde_json::json!({"role": "assistant", "content": answer}));
    }
    served
}

#[tokio::test]
async fn cache_aware_keeps_a_session_on_one_worker_round_robin_spreads_it() {
    let sims = start_sims(4).await;
    let gateway = switchyard_gateway::start(config_for(&sims, "cache_aware"), None)
        .await
        .unwrap();
    for topic in ["rivers", "volcanoes", "compilers"] {
        let served = conversation_workers(&gateway.base_url(), topic).await;
        let distinct: HashSet<_> = served.iter().collect();
        assert_eq!(
            distinct.len(),
            1,
            "cache_aware moved the {topic} session: {served:?}"
        );
    }
    let hits: u64 = sims.iter().map(|s| s.stats().cached_tokens).sum();
    assert!(hits > 0, "later turns reuse the cached prefix");
    gateway.shutdown().await;

    let sims = start_sims(4).await;
    let gateway = switchyard_gateway::start(config_for(&sims, "round_robin"), None)
        .await
        .unwrap();
    let served = conversation_workers(&gateway.base_url(), "rivers").await;
    let distinct: HashSet<_> = served.iter().collect();
    assert_eq!(
        distinct.len(),
        4,
        "round_robin should visit every worker: {served:?}"
    );
}
