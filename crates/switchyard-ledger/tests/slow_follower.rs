#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A leader whose AppendEntries answers come back later than the heartbeat interval (a
//! follower's disk slow for a moment, a long link) keeps its followers: a late answer is a
//! timeout, after which openraft sends the next heartbeat on time. Reported as an unreachable
//! peer it paused replication for its backoff (500 ms), the followers heard nothing for 600 ms
//! at a time, and here (as on a loaded machine with the old default timings) they stood for
//! election although nothing had failed.

mod common;

use common::*;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::SystemClock;
use switchyard_ledger::LedgerNode;
use tempfile::TempDir;

fn term(node: &LedgerNode) -> u64 {
    node.raft().metrics().borrow().current_term
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_append_answers_do_not_depose_the_leader() {
    let dir = TempDir::new().unwrap();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        let mut config = config(id, &dir, "127.0.0.1:0");
        // Followers stand after 480-560 ms without a heartbeat (leader lease = the maximum,
        // plus a drawn election timeout).
        config.raft.heartbeat_interval_ms = 100;
        config.raft.election_timeout_min_ms = 200;
        config.raft.election_timeout_max_ms = 280;
        nodes.push(start_with(config, Arc::new(SystemClock)).await);
    }
    form_group(&nodes).await;
    let leader = leader_index(&nodes);
    let term_before = term(&nodes[leader]);
    // Each call the leader makes now arrives after 60 ms and is answered after 120 ms or
    // more: past the 100 ms AppendEntries timeout, every time, yet it does arrive.
    nodes[leader]
        .faults()
        .set_one_way_delay(Duration::from_millis(60));
    tokio::time::sleep(Duration::from_secs(5)).await;
    // Late answers alone never depose the leader (an election every 600 ms or so when they
    // counted as unreachable: term 1 -> 5 in 4 s). One election is tolerated: a disk stall
    // longer than the followers' half-second patience also starts one on a loaded machine.
    for node in &nodes {
        let now = term(node);
        eprintln!("FIGURE node {}: term {term_before} -> {now}", node.id());
        assert!(
            now <= term_before + 1,
            "node {} saw {} elections although only the answers were late",
            node.id(),
            now - term_before
        );
    }
    nodes[leader].faults().set_one_way_delay(Duration::ZERO);
    for node in nodes {
        node.shutdown().await;
    }
}
