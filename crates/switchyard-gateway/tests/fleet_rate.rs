#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A budget's fleet-wide token rate, set through `PUT /admin/quota`, is enforced on the request
//! path from this replica's lease share: past it, 429 with `Retry-After`.

mod common;

use common::*;
use http::Method;
use std::time::Duration;
use switchyard_gateway::config::AdmissionConfig;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_past_the_fleet_rate_share_get_429_with_retry_after() {
    let sims = start_sims(1).await;
    let mut config = config_for(&sims, "round_robin");
    config.admission = serde_json::from_value::<AdmissionConfig>(serde_json::json!({
        "tenants": [{"api_key": "sk-a", "caller": "team-a", "max_priority": "P1"}]
    }))
    .unwrap();
    let gateway = switchyard_gateway::start(config, Some(ADMIN_KEY.into()))
        .await
        .unwrap();
    let base = gateway.base_url();
    let budget = serde_json::json!({
        "caller": "team-a", "tokens_per_day": 1_000_000_000u64, "tokens_per_second": 20
    });
    let set = send(
        Method::PUT,
        &format!("{base}/admin/quota"),
        &[
            ("authorization", &format!("Bearer {ADMIN_KEY}")),
            ("content-type", "application/json"),
        ],
        budget.to_string(),
    )
    .await;
    assert_eq!(set.status, 200, "{}", set.body);

    let url = format!("{base}/v1/chat/completions");
    let ask = |url: String| async move {
        send(
            Method::POST,
            &url,
            &[("authorization", "Bearer sk-a")],
            chat("sim-llama", "hello there", false).to_string(),
        )
        .await
    };
    // The first request waits for the lease (503 pending) and then spends the full bucket.
    let served = eventually(Duration::from_secs(10), || {
        let url = url.clone();
        async move { ask(url).await.status == 200 }
    })
    .await;
    assert!(served, "the budget's lease never arrived");

    let burst: Vec<_> = (0..20).map(|_| tokio::spawn(ask(url.clone()))).collect();
    let mut replies = Vec::new();
    for reply in burst {
        replies.push(reply.await.unwrap());
    }
    let refused: Vec<&Reply> = replies.iter().filter(|r| r.status == 429).collect();
    assert!(
        !refused.is_empty(),
        "20 requests at once cannot fit 20 tokens/s: {:?}",
        replies.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for reply in refused {
        assert!(
            reply.header("retry-after").is_some(),
            "429 without Retry-After"
        );
        // The ledger's fleet-wide rate share refuses as a rate limit, naming it.
        assert_eq!(reply.error_code(), "rate_limited", "{}", reply.body);
        assert!(
            reply.body.contains("fleet-wide rate limit"),
            "{}",
            reply.body
        );
        assert_eq!(
            reply.json()["error"]["type"],
            "rate_limit_error",
            "{}",
            reply.body
        );
    }
}
