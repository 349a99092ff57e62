//! Lost writes on hand-built histories and final states: each loss is caught, and the
//! matching intact state passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jepsen_like_tests::checker::{LostWritesChecker, Validity};
use jepsen_like_tests::history::{ErrorInfo, HistoryBuilder, OpResult};
use jepsen_like_tests::state::{NodeRead, NodeState, OverrideState, OverrideStatus, ReportId};
use std::collections::BTreeSet;

#[test]
fn lost_affinity_write_is_caught_on_the_node_that_lost_it() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 10, affinity(7, "w1"), OpResult::Recorded);
    let history = b.build();
    let mut good = NodeState::default();
    good.affinity.insert(7, "w1".into());
    let mut finals = finals(&good);
    let verdict = run(&LostWritesChecker, &history, &finals, &Default::default());
    assert_eq!(verdict.validity, Validity::Valid, "{verdict:?}");
    finals.nodes.insert(
        2,
        NodeRead {
            read_at_ns: 0,
            state: Ok(NodeState::default()),
        },
    );
    let verdict = run(&LostWritesChecker, &history, &finals, &Default::default());
    assert_eq!(verdict.validity, Validity::Invalid);
    assert_eq!(verdict.violations.len(), 1);
    assert!(verdict.violations[0].message.starts_with("node 2"));
}

#[test]
fn affinity_is_last_writer_wins_in_real_time() {
    let with = |worker: &str| {
        let mut state = NodeState::default();
        state.affinity.insert(7, worker.into());
        state
    };
    // Sequential writes: only the later value may survive.
    let mut sequential = HistoryBuilder::new();
    sequential
        .ok(1, 1, 0, 10, affinity(7, "w1"), OpResult::Recorded)
        .ok(2, 2, 20, 30, affinity(7, "w2"), OpResult::Recorded);
    let history = sequential.build();
    assert_eq!(
        run(
            &LostWritesChecker,
            &history,
            &finals(&with("w2")),
            &Default::default()
        )
        .validity,
        Validity::Valid
    );
    let stale = run(
        &LostWritesChecker,
        &history,
        &finals(&with("w1")),
        &Default::default(),
    );
    assert_eq!(
        stale.validity,
        Validity::Invalid,
        "the acknowledged later write was lost"
    );
    let invented = run(
        &LostWritesChecker,
        &history,
        &finals(&with("w9")),
        &Default::default(),
    );
    assert_eq!(invented.validity, Validity::Invalid, "nobody wrote w9");
    // Concurrent writes: either may win.
    let mut concurrent = HistoryBuilder::new();
    concurrent
        .ok(1, 1, 0, 30, affinity(7, "w1"), OpResult::Recorded)
        .ok(2, 2, 10, 20, affinity(7, "w2"), OpResult::Recorded);
    let history = concurrent.build();
    for worker in ["w1", "w2"] {
        assert_eq!(
            run(
                &LostWritesChecker,
                &history,
                &finals(&with(worker)),
                &Default::default()
            )
            .validity,
            Validity::Valid
        );
    }
    // An unknown-outcome write may take effect late and win.
    let mut late = HistoryBuilder::new();
    late.info(
        1,
        1,
        0,
        5,
        affinity(7, "w3"),
        ErrorInfo::new("client_timeout"),
    )
    .ok(2, 2, 20, 30, affinity(7, "w2"), OpResult::Recorded);
    assert_eq!(
        run(
            &LostWritesChecker,
            &late.build(),
            &finals(&with("w3")),
            &Default::default()
        )
        .validity,
        Validity::Valid
    );
}

fn override_state(status: OverrideStatus, approver: Option<&str>) -> NodeState {
    let mut state = NodeState::default();
    state.overrides.insert(
        1,
        OverrideState {
            scope: scope("alice"),
            extra_tokens: 500,
            duration_ms: 60_000,
            requester: "ann".into(),
            approver: approver.map(Into::into),
            status,
        },
    );
    state
}

#[test]
fn lost_override_changes_are_caught() {
    let mut b = HistoryBuilder::new();
    b.ok(
        1,
        1,
        0,
        5,
        propose("alice", 500, 60_000, "ann"),
        OpResult::Proposed { id: 1 },
    )
    .ok(1, 1, 10, 15, approve(1, "ben"), OpResult::Approved);
    let approved = b.build();
    let config = Default::default();
    let good = override_state(OverrideStatus::Active, Some("ben"));
    assert_eq!(
        run(&LostWritesChecker, &approved, &finals(&good), &config).validity,
        Validity::Valid
    );
    let missing = run(
        &LostWritesChecker,
        &approved,
        &finals(&NodeState::default()),
        &config,
    );
    assert!(
        missing
            .violations
            .iter()
            .any(|v| v.message.contains("acknowledged proposal 1 is missing"))
    );
    let pending = run(
        &LostWritesChecker,
        &approved,
        &finals(&override_state(OverrideStatus::Pending, None)),
        &config,
    );
    assert!(
        pending
            .violations
            .iter()
            .any(|v| v.message.contains("still pending"))
    );
    b.ok(1, 1, 20, 25, revoke(1, "cy"), OpResult::Revoked);
    let revoked = b.build();
    let not_revoked = run(&LostWritesChecker, &revoked, &finals(&good), &config);
    assert!(
        not_revoked
            .violations
            .iter()
            .any(|v| v.message.contains("revocation of 1 lost"))
    );
    let good = override_state(OverrideStatus::Revoked, Some("ben"));
    assert_eq!(
        run(&LostWritesChecker, &revoked, &finals(&good), &config).validity,
        Validity::Valid
    );
}

#[test]
fn lost_spend_and_reports_are_caught() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 5, spend("alice", 400), spent(300))
        .ok(2, 2, 0, 5, spend("alice", 400), spent(200))
        .ok(
            3,
            3,
            0,
            5,
            jepsen_like_tests::history::Op::ReportSpend {
                reporter: "r".into(),
                seq: 4,
                scope: scope("alice"),
                tokens: 10,
            },
            OpResult::Reported,
        );
    let history = b.build();
    let mut state = NodeState::default();
    state.accounted_tokens.insert(scope("alice"), 500);
    state.spend_reports = Some(BTreeSet::from([ReportId {
        reporter: "r".into(),
        seq: 4,
    }]));
    assert_eq!(
        run(
            &LostWritesChecker,
            &history,
            &finals(&state),
            &Default::default()
        )
        .validity,
        Validity::Valid
    );
    state.accounted_tokens.insert(scope("alice"), 300);
    state.spend_reports = Some(BTreeSet::new());
    let verdict = run(
        &LostWritesChecker,
        &history,
        &finals(&state),
        &Default::default(),
    );
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.message.contains("200 tokens lost"))
    );
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.message.contains("spend report"))
    );
}
