//! Budget safety on hand-built histories: each over-admission is caught, and the matching
//! correct history passes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use jepsen_like_tests::checker::{BudgetSafetyChecker, Validity};
use jepsen_like_tests::history::{ErrorInfo, HistoryBuilder, OpResult};
use jepsen_like_tests::state::{BudgetState, NodeState};

#[test]
fn budget_within_limit_is_valid_and_refusals_do_not_count() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 10, spend("alice", 500), spent(450))
        .ok(2, 2, 5, 20, spend("alice", 500), spent(450))
        .fail(
            3,
            3,
            30,
            40,
            spend("alice", 500),
            ErrorInfo::http(429, "quota_exhausted"),
        )
        .ok(4, 1, 30, 40, spend("bob", 5_000), spent(5_000));
    let verdict = run(
        &BudgetSafetyChecker,
        &b.build(),
        &finals(&NodeState::default()),
        &config_with_budget("alice", 1_000),
    );
    assert_eq!(verdict.validity, Validity::Valid, "{verdict:?}");
}

#[test]
fn budget_over_admission_is_caught_with_the_admissions_past_the_cap() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 10, spend("alice", 500), spent(500))
        .ok(2, 2, 20, 30, spend("alice", 500), spent(400))
        .ok(3, 3, 40, 50, spend("alice", 500), spent(300));
    let verdict = run(
        &BudgetSafetyChecker,
        &b.build(),
        &finals(&NodeState::default()),
        &config_with_budget("alice", 1_000),
    );
    assert_eq!(verdict.validity, Validity::Invalid);
    let violation = &verdict.violations[0];
    assert!(
        violation.message.contains("exceed the cap of 1000 by 200"),
        "{}",
        violation.message
    );
    assert_eq!(
        violation.ops.len(),
        1,
        "only the third admission crossed the cap"
    );
    assert_eq!(violation.ops[0].process(), 3);
}

#[test]
fn approved_overrides_raise_the_cap() {
    let mut b = HistoryBuilder::new();
    b.ok(
        9,
        1,
        0,
        5,
        propose("alice", 700, 60_000, "ann"),
        OpResult::Proposed { id: 1 },
    )
    .ok(9, 1, 6, 8, approve(1, "ben"), OpResult::Approved)
    .ok(1, 1, 10, 20, spend("alice", 800), spent(800))
    .ok(2, 2, 30, 40, spend("alice", 700), spent_under(700, 1));
    let history = b.build();
    let config = config_with_budget("alice", 1_000);
    let verdict = run(
        &BudgetSafetyChecker,
        &history,
        &finals(&NodeState::default()),
        &config,
    );
    assert_eq!(verdict.validity, Validity::Valid, "{verdict:?}");

    let mut unapproved = HistoryBuilder::new();
    unapproved
        .ok(
            9,
            1,
            0,
            5,
            propose("alice", 500, 60_000, "ann"),
            OpResult::Proposed { id: 1 },
        )
        .ok(1, 1, 10, 20, spend("alice", 800), spent(800))
        .ok(2, 2, 30, 40, spend("alice", 700), spent(700));
    let verdict = run(
        &BudgetSafetyChecker,
        &unapproved.build(),
        &finals(&NodeState::default()),
        &config,
    );
    assert_eq!(
        verdict.validity,
        Validity::Invalid,
        "a proposal alone grants nothing"
    );
}

#[test]
fn unknown_outcomes_count_as_admitted_unless_configured_otherwise() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 10, spend("alice", 900), spent(900)).info(
        2,
        2,
        0,
        50,
        spend("alice", 200),
        ErrorInfo::new("client_timeout"),
    );
    let history = b.build();
    let mut config = config_with_budget("alice", 1_000);
    let verdict = run(
        &BudgetSafetyChecker,
        &history,
        &finals(&NodeState::default()),
        &config,
    );
    assert_eq!(verdict.validity, Validity::Invalid);
    assert!(verdict.violations[0].message.contains("possibly admitted"));
    assert_eq!(verdict.violations[0].ops[0].process(), 2);
    let mut ledger = NodeState::default();
    ledger.budgets.insert(
        scope("alice"),
        BudgetState {
            limit: 1_000,
            spent: 950,
            held: 50,
        },
    );
    let verdict = run(&BudgetSafetyChecker, &history, &finals(&ledger), &config);
    assert_eq!(
        verdict.validity,
        Validity::Valid,
        "the ledgers show the unknown spend was not all admitted"
    );
    config.count_info_as_admitted = false;
    let verdict = run(
        &BudgetSafetyChecker,
        &history,
        &finals(&NodeState::default()),
        &config,
    );
    assert_eq!(verdict.validity, Validity::Valid);
}

#[test]
fn a_node_accounting_more_than_the_cap_is_caught() {
    let mut state = NodeState::default();
    state.budgets.insert(
        scope("alice"),
        BudgetState {
            limit: 1_000,
            spent: 900,
            held: 200,
        },
    );
    let verdict = run(
        &BudgetSafetyChecker,
        &HistoryBuilder::new().build(),
        &finals(&state),
        &config_with_budget("alice", 1_000),
    );
    assert_eq!(verdict.validity, Validity::Invalid);
    assert!(
        verdict.violations[0]
            .message
            .contains("900 spent + 200 held")
    );
}

#[test]
fn each_pool_is_capped_on_its_own() {
    let mut b = HistoryBuilder::new();
    b.ok(
        9,
        1,
        0,
        5,
        propose("alice", 300, 60_000, "ann"),
        OpResult::Proposed { id: 1 },
    )
    .ok(9, 1, 6, 8, approve(1, "ben"), OpResult::Approved)
    .ok(1, 1, 10, 20, spend("alice", 900), spent(900))
    .ok(2, 2, 30, 40, spend("alice", 400), spent_under(400, 1));
    let config = config_with_budget("alice", 1_000);
    let verdict = run(
        &BudgetSafetyChecker,
        &b.build(),
        &finals(&NodeState::default()),
        &config,
    );
    assert_eq!(
        verdict.validity,
        Validity::Invalid,
        "1300 fits 1000 + 300, but the override gave only 300"
    );
    assert!(
        verdict.violations[0]
            .message
            .contains("granted 300 tokens but 400 were drawn")
    );
    let mut untagged = HistoryBuilder::new();
    untagged
        .ok(
            9,
            1,
            0,
            5,
            propose("alice", 300, 60_000, "ann"),
            OpResult::Proposed { id: 1 },
        )
        .ok(9, 1, 6, 8, approve(1, "ben"), OpResult::Approved)
        .ok(1, 1, 10, 20, spend("alice", 1_200), spent(1_200));
    let verdict = run(
        &BudgetSafetyChecker,
        &untagged.build(),
        &finals(&NodeState::default()),
        &config,
    );
    assert!(
        verdict.violations[0]
            .message
            .contains("not drawn from any override exceed the budget of 1000")
    );
}
