//! Convergence and availability on hand-built histories and final states.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jepsen_like_tests::checker::{
    AvailabilityChecker, CheckConfig, ConvergenceChecker, Validity, availability_by_fault,
};
use jepsen_like_tests::history::{ErrorInfo, HistoryBuilder, OpResult};
use jepsen_like_tests::state::{FinalStates, NodeRead, NodeState};

fn state_with_affinity(worker: &str) -> NodeState {
    let mut state = NodeState::default();
    state.affinity.insert(1, worker.into());
    state
}

fn convergence(finals: &FinalStates) -> jepsen_like_tests::checker::Verdict {
    run(
        &ConvergenceChecker,
        &HistoryBuilder::new().build(),
        finals,
        &CheckConfig::default(),
    )
}

#[test]
fn agreeing_nodes_converge() {
    let mut finals = finals(&state_with_affinity("w1"));
    finals
        .nodes
        .get_mut(&2)
        .unwrap()
        .state
        .as_mut()
        .unwrap()
        .applied_index = Some(99);
    assert_eq!(
        convergence(&finals).validity,
        Validity::Valid,
        "the applied index is not compared"
    );
}

#[test]
fn diverging_or_unreadable_nodes_are_caught() {
    let mut finals = finals(&state_with_affinity("w1"));
    finals.nodes.insert(
        3,
        NodeRead {
            read_at_ns: 0,
            state: Ok(state_with_affinity("w2")),
        },
    );
    let verdict = convergence(&finals);
    assert_eq!(verdict.validity, Validity::Invalid);
    assert!(
        verdict.violations[0]
            .message
            .contains("nodes [3] disagree with nodes [1, 2]: affinity [1]")
    );
    finals.nodes.insert(
        3,
        NodeRead {
            read_at_ns: 0,
            state: Err("connection refused".into()),
        },
    );
    let verdict = convergence(&finals);
    assert!(
        verdict.violations[0]
            .message
            .contains("node 3 could not be read")
    );
}

#[test]
fn agreement_past_the_bound_is_caught() {
    let mut finals = finals(&state_with_affinity("w1"));
    finals.healed_at_ns = Some(10_000_000_000);
    finals.quiesced_at_ns = Some(20_000_000_000);
    finals.converged_at_ns = Some(45_000_000_000);
    let verdict = convergence(&finals);
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "25 s after the traffic stopped, bound 30 s"
    );
    finals.converged_at_ns = Some(55_000_000_000);
    let verdict = convergence(&finals);
    assert!(verdict.violations[0].message.contains("over the 30s bound"));
}

fn availability(b: &HistoryBuilder) -> jepsen_like_tests::checker::Verdict {
    run(
        &AvailabilityChecker,
        &b.build(),
        &finals(&NodeState::default()),
        &CheckConfig::default(),
    )
}

#[test]
fn clean_failures_are_fine_hangs_and_unclear_errors_are_not() {
    let mut clean = HistoryBuilder::new();
    clean
        .ok(1, 1, 0, 10, spend("a", 10), spent(10))
        .fail(
            2,
            2,
            0,
            4_000,
            spend("a", 10),
            ErrorInfo::http(503, "quota_ledger_unreachable"),
        )
        .info(3, 3, 0, 5_500, spend("a", 10), ErrorInfo::new("timeout"));
    assert_eq!(availability(&clean).validity, Validity::Valid);
    let mut hang = HistoryBuilder::new();
    hang.info(
        1,
        1,
        0,
        7_000,
        spend("a", 10),
        ErrorInfo::new("client_timeout"),
    );
    assert!(
        availability(&hang).violations[0]
            .message
            .contains("later than the 5.0s timeout")
    );
    let mut never = HistoryBuilder::new();
    never.pending(1, 1, 0, spend("a", 10));
    assert!(
        availability(&never).violations[0]
            .message
            .contains("never completed")
    );
    let mut unclear = HistoryBuilder::new();
    unclear
        .fail(1, 1, 0, 10, spend("a", 10), ErrorInfo::http(502, "oops"))
        .fail(2, 2, 0, 10, spend("a", 10), ErrorInfo::http(500, ""));
    let verdict = availability(&unclear);
    let messages: Vec<&str> = verdict
        .violations
        .iter()
        .map(|v| v.message.as_str())
        .collect();
    assert_eq!(
        messages,
        vec![
            "1 failure(s) without a clear reason",
            "1 500 response(s) without a cause"
        ]
    );
}

#[test]
fn requests_to_a_paused_node_are_not_hangs() {
    let mut b = HistoryBuilder::new();
    b.fault_window(1, "pause", vec![2], 1_000, 9_000)
        .info(
            1,
            2,
            2_000,
            9_000,
            spend("a", 10),
            ErrorInfo::new("client_timeout"),
        )
        .info(
            2,
            1,
            2_000,
            9_000,
            spend("a", 10),
            ErrorInfo::new("client_timeout"),
        );
    let verdict = availability(&b);
    assert_eq!(verdict.violations.len(), 1);
    assert_eq!(
        verdict.violations[0].ops[0].node(),
        Some(1),
        "only the healthy node hung"
    );
}

#[test]
fn availability_is_counted_per_fault_kind_and_can_be_required() {
    let mut b = HistoryBuilder::new();
    b.fault_window(1, "partition", vec![3], 100, 200)
        .ok(1, 1, 0, 10, spend("a", 10), spent(10))
        .ok(2, 1, 120, 130, spend("a", 10), spent(10))
        .fail(
            3,
            3,
            120,
            130,
            spend("a", 10),
            ErrorInfo::http(503, "quota_ledger_unreachable"),
        )
        .fail(
            4,
            2,
            150,
            160,
            spend("a", 10),
            ErrorInfo::http(429, "quota_exhausted"),
        )
        .ok(5, 2, 300, 310, spend("a", 10), OpResult::Recorded);
    let history = b.build();
    let mut config = CheckConfig::default();
    let stats = availability_by_fault(&history, &history.operations().unwrap(), &config);
    let partition = &stats["partition"];
    assert_eq!(
        (
            partition.windows,
            partition.total,
            partition.ok,
            partition.refused,
            partition.unavailable
        ),
        (1, 3, 1, 1, 1)
    );
    assert_eq!(stats["none"].total, 2);
    config.min_answered_share.insert("partition".into(), 0.9);
    let verdict = run(
        &AvailabilityChecker,
        &history,
        &finals(&NodeState::default()),
        &config,
    );
    assert!(
        verdict.violations[0]
            .message
            .contains("partition: answered 66.7%")
    );
}
