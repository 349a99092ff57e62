#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The OpenAI Python SDK (chat, streaming chat, completions, embeddings) against the gateway
//! in front of simulated workers. Skips with a message when `python3` or its `openai` package
//! is missing (`pip install openai`).

mod common;

use common::*;

#[tokio::test]
async fn the_openai_sdk_calls_work_through_the_gateway() {
    let probe = tokio::process::Command::new("python3")
        .args(["-c", "import openai"])
        .output()
        .await;
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "SKIPPED: python3 with the `openai` package is not available (pip install openai)"
        );
        return;
    }
    let sims = start_sims(2).await;
    let gateway = switchyard_gateway::start(config_for(&sims, "cache_aware"), None)
        .await
        .unwrap();
    let stdout = openai_sdk_check(&[&gateway.base_url(), "sim-llama"]).await;
    assert!(stdout.contains("embeddings ok"), "{stdout}");
    eprintln!("{stdout}");
}
