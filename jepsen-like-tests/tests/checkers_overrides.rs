//! Override rules and the linearizability of the override registry on hand-built histories.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jepsen_like_tests::checker::{OverrideLinearizabilityChecker, OverrideRulesChecker, Validity};
use jepsen_like_tests::history::{ErrorInfo, HistoryBuilder, Op, OpResult};
use jepsen_like_tests::state::{NodeState, OverrideStatus::*};

fn proposed_and_approved(approver: &str) -> HistoryBuilder {
    let mut b = HistoryBuilder::new();
    b.ok(
        1,
        1,
        0,
        100,
        propose("alice", 500, 5_000, "ann"),
        OpResult::Proposed { id: 1 },
    )
    .ok(1, 1, 900, 1_000, approve(1, approver), OpResult::Approved);
    b
}

fn rules(b: &HistoryBuilder) -> jepsen_like_tests::checker::Verdict {
    run(
        &OverrideRulesChecker,
        &b.build(),
        &finals(&NodeState::default()),
        &Default::default(),
    )
}

#[test]
fn self_approval_is_caught_and_a_second_person_is_fine() {
    assert_eq!(
        rules(&proposed_and_approved("ben")).validity,
        Validity::Valid
    );
    let verdict = rules(&proposed_and_approved(" ANN "));
    assert_eq!(verdict.validity, Validity::Invalid);
    assert!(
        verdict.violations[0]
            .message
            .contains("its own requester ann")
    );
    assert_eq!(
        verdict.violations[0].ops.len(),
        2,
        "the proposal and the approval"
    );
}

#[test]
fn renewal_by_second_approval_and_overlong_grants_are_caught() {
    let mut b = proposed_and_approved("ben");
    b.ok(2, 2, 7_000, 7_100, approve(1, "cy"), OpResult::Approved);
    let verdict = rules(&b);
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.message.contains("approved 2 times"))
    );
    let mut long = HistoryBuilder::new();
    long.ok(
        1,
        1,
        0,
        10,
        propose("alice", 5, 3 * 60 * 60 * 1000, "ann"),
        OpResult::Proposed { id: 1 },
    );
    assert!(
        rules(&long)
            .violations
            .iter()
            .any(|v| v.message.contains("above the 7200000 ms maximum"))
    );
}

#[test]
fn use_after_expiry_is_caught_within_the_clock_tolerance() {
    // Approved by t = 1 s for 5 s: the deadline is 6 s, tolerance 2 s.
    let mut inside = proposed_and_approved("ben");
    inside.ok(3, 2, 7_500, 7_600, spend("alice", 100), spent_under(100, 1));
    assert_eq!(rules(&inside).validity, Validity::Valid);
    let mut after = proposed_and_approved("ben");
    after.ok(3, 2, 8_500, 8_600, spend("alice", 100), spent_under(100, 1));
    let verdict = rules(&after);
    assert_eq!(verdict.validity, Validity::Invalid);
    assert!(verdict.violations[0].message.contains("after its deadline"));
    let mut listed_active = proposed_and_approved("ben");
    listed_active.ok(
        4,
        3,
        9_000,
        9_100,
        Op::ListOverrides,
        listed(&[(1, Active, "ann")]),
    );
    assert!(
        rules(&listed_active).violations[0]
            .message
            .contains("listed as active")
    );
}

#[test]
fn use_without_approval_or_after_revocation_is_caught() {
    let mut unapproved = HistoryBuilder::new();
    unapproved
        .ok(
            1,
            1,
            0,
            10,
            propose("alice", 500, 60_000, "ann"),
            OpResult::Proposed { id: 1 },
        )
        .ok(2, 2, 20, 30, spend("alice", 100), spent_under(100, 1));
    assert!(
        rules(&unapproved).violations[0]
            .message
            .contains("never approved")
    );
    let mut revoked = proposed_and_approved("ben");
    revoked
        .ok(5, 1, 1_100, 1_200, revoke(1, "cy"), OpResult::Revoked)
        .ok(3, 2, 4_000, 4_100, spend("alice", 100), spent_under(100, 1));
    assert!(
        rules(&revoked).violations[0]
            .message
            .contains("after it was revoked")
    );
}

fn linearizable(b: &HistoryBuilder) -> Validity {
    run(
        &OverrideLinearizabilityChecker,
        &b.build(),
        &finals(&NodeState::default()),
        &Default::default(),
    )
    .validity
}

#[test]
fn registry_reads_must_reflect_acknowledged_changes() {
    let mut good = proposed_and_approved("ben");
    good.ok(
        2,
        2,
        1_500,
        1_600,
        Op::ListOverrides,
        listed(&[(1, Active, "ann")]),
    );
    assert_eq!(linearizable(&good), Validity::Valid);
    let mut stale = proposed_and_approved("ben");
    stale.ok(
        2,
        2,
        1_500,
        1_600,
        Op::ListOverrides,
        listed(&[(1, Pending, "ann")]),
    );
    let verdict = run(
        &OverrideLinearizabilityChecker,
        &stale.build(),
        &finals(&NodeState::default()),
        &Default::default(),
    );
    assert_eq!(verdict.validity, Validity::Invalid);
    assert!(
        verdict.violations[0]
            .ops
            .iter()
            .any(|op| matches!(op.op(), Op::ListOverrides))
    );
    let mut concurrent = HistoryBuilder::new();
    concurrent
        .ok(
            1,
            1,
            0,
            100,
            propose("alice", 500, 5_000, "ann"),
            OpResult::Proposed { id: 1 },
        )
        .ok(1, 1, 200, 1_000, approve(1, "ben"), OpResult::Approved)
        .ok(
            2,
            2,
            300,
            400,
            Op::ListOverrides,
            listed(&[(1, Pending, "ann")]),
        );
    assert_eq!(
        linearizable(&concurrent),
        Validity::Valid,
        "the read may precede the approval"
    );
}

#[test]
fn expiry_is_allowed_but_never_undone_and_the_two_person_rule_holds() {
    let mut expired = proposed_and_approved("ben");
    expired.ok(
        2,
        2,
        7_000,
        7_100,
        Op::ListOverrides,
        listed(&[(1, Expired, "ann")]),
    );
    assert_eq!(linearizable(&expired), Validity::Valid);
    expired.ok(
        2,
        2,
        8_000,
        8_100,
        Op::ListOverrides,
        listed(&[(1, Active, "ann")]),
    );
    assert_eq!(
        linearizable(&expired),
        Validity::Invalid,
        "an expired override came back"
    );
    let mut renewed = proposed_and_approved("ben");
    renewed
        .ok(
            2,
            2,
            7_000,
            7_100,
            Op::ListOverrides,
            listed(&[(1, Expired, "ann")]),
        )
        .ok(3, 3, 7_200, 7_300, approve(1, "cy"), OpResult::Approved);
    assert_eq!(linearizable(&renewed), Validity::Invalid, "no renewal");
    assert_eq!(
        linearizable(&proposed_and_approved("ann")),
        Validity::Invalid
    );
}

#[test]
fn unknown_proposals_and_duplicate_ids() {
    let mut ghost = HistoryBuilder::new();
    ghost
        .info(
            1,
            1,
            0,
            100,
            propose("alice", 500, 5_000, "ann"),
            ErrorInfo::new("client_timeout"),
        )
        .ok(2, 2, 500, 600, approve(1, "ben"), OpResult::Approved)
        .ok(
            3,
            3,
            700,
            800,
            Op::ListOverrides,
            listed(&[(1, Active, "ann")]),
        );
    assert_eq!(
        linearizable(&ghost),
        Validity::Valid,
        "the timed-out proposal took effect"
    );
    let mut phantom = HistoryBuilder::new();
    phantom.ok(2, 2, 500, 600, approve(1, "ben"), OpResult::Approved);
    assert_eq!(
        linearizable(&phantom),
        Validity::Invalid,
        "nobody proposed 1"
    );
    let mut duplicate = HistoryBuilder::new();
    duplicate
        .ok(
            1,
            1,
            0,
            10,
            propose("alice", 500, 5_000, "ann"),
            OpResult::Proposed { id: 1 },
        )
        .ok(
            2,
            2,
            20,
            30,
            propose("bob", 500, 5_000, "ben"),
            OpResult::Proposed { id: 1 },
        );
    assert_eq!(
        linearizable(&duplicate),
        Validity::Invalid,
        "one id handed out twice"
    );
}

#[test]
fn a_refusal_that_took_effect_is_caught() {
    // Approval by ben answered 409 (refused), yet the override shows ben as its approver: what
    // a retried forwarded write does when its first attempt applied.
    let mut b = HistoryBuilder::new();
    b.ok(
        1,
        1,
        0,
        100,
        propose("alice", 500, 60_000, "ann"),
        OpResult::Proposed { id: 1 },
    )
    .fail(
        2,
        2,
        200,
        2_400,
        approve(1, "ben"),
        ErrorInfo::http(409, "override_not_pending"),
    );
    let mut state = NodeState::default();
    state.overrides.insert(
        1,
        jepsen_like_tests::state::OverrideState {
            scope: scope("alice"),
            extra_tokens: 500,
            duration_ms: 60_000,
            requester: "ann".into(),
            approver: Some("ben".into()),
            status: Active,
        },
    );
    let config = Default::default();
    let verdict = run(&OverrideRulesChecker, &b.build(), &finals(&state), &config);
    assert_eq!(verdict.validity, Validity::Invalid);
    assert!(
        verdict.violations[0]
            .message
            .contains("refusal that took effect")
    );
    assert_eq!(
        verdict.violations[0].ops.len(),
        2,
        "the proposal and the refused approval"
    );
    // A listing after it shows the override active: no linearization explains that either.
    let mut listed_after = b.clone();
    listed_after.ok(
        4,
        3,
        3_000,
        3_050,
        Op::ListOverrides,
        listed(&[(1, Active, "ann")]),
    );
    let linear = run(
        &OverrideLinearizabilityChecker,
        &listed_after.build(),
        &finals(&state),
        &config,
    );
    assert_eq!(linear.validity, Validity::Invalid);
    // The same approval answered ok (or unknown) explains the record.
    let mut fine = HistoryBuilder::new();
    fine.ok(
        1,
        1,
        0,
        100,
        propose("alice", 500, 60_000, "ann"),
        OpResult::Proposed { id: 1 },
    )
    .info(
        2,
        2,
        200,
        2_400,
        approve(1, "ben"),
        ErrorInfo::new("timeout"),
    );
    let verdict = run(
        &OverrideRulesChecker,
        &fine.build(),
        &finals(&state),
        &config,
    );
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "{:?}",
        verdict.violations
    );
    // Revoked although the only revocation was refused.
    state.overrides.get_mut(&1).unwrap().status = Revoked;
    b.fail(
        3,
        1,
        3_000,
        3_100,
        revoke(1, "cy"),
        ErrorInfo::http(409, "override_not_pending"),
    );
    let verdict = run(&OverrideRulesChecker, &b.build(), &finals(&state), &config);
    assert!(
        verdict
            .violations
            .iter()
            .any(|v| v.message.contains("is revoked, but every revocation"))
    );
}
