#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Three real gateway processes in one Raft group with cache-aware routing: every replica's
//! first-turn placements go through the ledger, and from the records coming back each replica
//! learns how many replicas are placing (`switchyard_routing_placement_replicas`; where more
//! than one is, later turns follow their first wherever it went).

mod common;

use common::*;
use std::time::Duration;

const KEY: &str = "sk-placement-0123456789";
const GAUGE: &str = "switchyard_routing_placement_replicas";

/// The first turn of conversation `n`: a system prompt long enough to be planned as a group,
/// and an opening of its own.
fn first_turn(n: usize) -> serde_json::Value {
    let system =
        "You are the support desk of a parcel service; answer from the manual. ".repeat(20);
    serde_json::json!({
        "model": "sim-llama",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": format!("ticket {n}: where is parcel {n}?")},
        ],
        "max_tokens": 8,
    })
}

#[tokio::test]
async fn replicas_of_one_group_count_the_replicas_placing_from_the_replicated_records() {
    let body = format!(
        "{}\n[routing]\npolicy = \"cache_aware\"\n",
        far_from_spent_tenant(KEY)
    );
    let group = ReplicaGroup::start((3, 8), "placement-test-cluster-secret", &body).await;
    let bases = &group.bases;
    let serving = eventually(Duration::from_secs(30), || async {
        let mut all = true;
        for base in bases {
            all &= tenant_chat(base, KEY, &first_turn(0)).await.status == 200;
        }
        all
    })
    .await;
    assert!(serving, "every replica answers");

    // Rounds of new conversations, one per replica each, until every replica has announced
    // enough placements to judge and the others' records have come back.
    let mut next = 1;
    let counted = eventually(Duration::from_secs(30), || {
        let start = next;
        next += bases.len();
        async move {
            for (offset, base) in bases.iter().enumerate() {
                let reply = tenant_chat(base, KEY, &first_turn(start + offset)).await;
                assert_eq!(reply.status, 200, "{}", reply.body);
            }
            let mut estimates = Vec::new();
            for base in bases {
                estimates.push(metric_value(&metrics_text(base).await, GAUGE));
            }
            estimates.iter().all(|&n| (2.5..=3.5).contains(&n))
        }
    })
    .await;
    let mut estimates = Vec::new();
    for base in bases {
        estimates.push(metric_value(&metrics_text(base).await, GAUGE));
    }
    assert!(
        counted,
        "replicas placing, as each replica sees them: {estimates:?}"
    );
}
