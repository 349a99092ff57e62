//! Shared builders for the checker tests.
#![allow(dead_code)]

use jepsen_like_tests::checker::{CheckConfig, CheckInput, Checker, Verdict};
use jepsen_like_tests::history::{History, Op, OpResult, OverrideView};
use jepsen_like_tests::state::{FinalStates, NodeState, OverrideStatus};
use switchyard_core::{Priority, Purpose, QuotaScope};

pub fn scope(caller: &str) -> QuotaScope {
    QuotaScope::caller(caller)
}

pub fn spend(caller: &str, max_tokens: u64) -> Op {
    Op::Spend {
        caller: caller.into(),
        purpose: Purpose::Business,
        priority: Priority::P1,
        max_tokens,
    }
}

pub fn spent(tokens: u64) -> OpResult {
    OpResult::Spent {
        tokens,
        override_id: None,
    }
}

pub fn spent_under(tokens: u64, id: u64) -> OpResult {
    OpResult::Spent {
        tokens,
        override_id: Some(id),
    }
}

pub fn propose(caller: &str, extra_tokens: u64, duration_ms: u64, requester: &str) -> Op {
    Op::ProposeOverride {
        scope: scope(caller),
        extra_tokens,
        duration_ms,
        requester: requester.into(),
    }
}

pub fn approve(id: u64, approver: &str) -> Op {
    Op::ApproveOverride {
        id,
        approver: approver.into(),
    }
}

pub fn revoke(id: u64, principal: &str) -> Op {
    Op::RevokeOverride {
        id,
        principal: principal.into(),
    }
}

pub fn affinity(prefix_key: u64, worker: &str) -> Op {
    Op::RecordAffinity {
        prefix_key,
        worker: worker.into(),
    }
}

pub fn listed(entries: &[(u64, OverrideStatus, &str)]) -> OpResult {
    OpResult::Overrides {
        records: entries
            .iter()
            .map(|(id, status, requester)| OverrideView {
                id: *id,
                status: *status,
                requester: (*requester).into(),
                approver: None,
            })
            .collect(),
    }
}

pub fn config_with_budget(caller: &str, limit: u64) -> CheckConfig {
    let mut config = CheckConfig::default();
    config.budgets.insert(scope(caller), limit);
    config
}

/// The same final state on nodes 1..=3.
pub fn finals(state: &NodeState) -> FinalStates {
    FinalStates::uniform(&[1, 2, 3], state, 0)
}

pub fn run(
    checker: &dyn Checker,
    history: &History,
    finals: &FinalStates,
    config: &CheckConfig,
) -> Verdict {
    let input = CheckInput::new(history, finals, config).unwrap();
    checker.check(&input)
}
