//! Checkers judge a history plus the final state read from every node. Each returns a
//! [`Verdict`]: valid, invalid (with the offending operations) or unknown (could not judge).

mod availability;
mod budget;
mod convergence;
pub mod linearizable;
mod lost_writes;
mod override_rules;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;
use switchyard_core::QuotaScope;

use crate::history::{History, HistoryError, Operation};
use crate::state::FinalStates;

pub use availability::{AvailabilityChecker, NO_FAULT, WindowStats, availability_by_fault};
pub use budget::BudgetSafetyChecker;
pub use convergence::ConvergenceChecker;
pub use linearizable::OverrideLinearizabilityChecker;
pub use lost_writes::LostWritesChecker;
pub use override_rules::OverrideRulesChecker;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validity {
    Valid,
    Invalid,
    /// The checker could not decide (missing data, search budget exhausted).
    Unknown,
}

/// One broken rule and the operations that show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub message: String,
    pub ops: Vec<Operation>,
}

impl Violation {
    pub fn new(message: impl Into<String>, ops: Vec<Operation>) -> Self {
        Self {
            message: message.into(),
            ops,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub checker: String,
    pub validity: Validity,
    pub violations: Vec<Violation>,
    /// What was checked, figures, and why a part was not judged.
    pub notes: Vec<String>,
}

impl Verdict {
    /// Invalid when there are violations, otherwise valid (or unknown if `undecided`).
    pub fn from_findings(
        checker: &str,
        violations: Vec<Violation>,
        notes: Vec<String>,
        undecided: bool,
    ) -> Self {
        let validity = if !violations.is_empty() {
            Validity::Invalid
        } else if undecided {
            Validity::Unknown
        } else {
            Validity::Valid
        };
        Self {
            checker: checker.to_owned(),
            validity,
            violations,
            notes,
        }
    }

    pub fn is_valid(&self) -> bool {
        self.validity == Validity::Valid
    }
}

impl fmt::Display for Validity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Validity::Valid => "VALID",
            Validity::Invalid => "INVALID",
            Validity::Unknown => "UNKNOWN",
        })
    }
}

/// The rules' parameters. Budgets come from the workload's setup (what it configured), not
/// from the nodes, so a node that corrupts its own limit cannot hide an over-admission.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CheckConfig {
    /// Period budget per scope, in tokens, for the whole run.
    #[serde(with = "crate::serde_pairs")]
    pub budgets: BTreeMap<QuotaScope, u64>,
    /// Documented over-admission slack per scope (0: none allowed).
    pub budget_slack_tokens: u64,
    /// Count unknown-outcome spends as admitted (their full `max_tokens`).
    pub count_info_as_admitted: bool,
    /// Whether acknowledged spends say which override paid for them. Without it the
    /// per-pool rules (own budget alone, each override within its grant) are not judged.
    #[serde(default = "yes")]
    pub override_attribution: bool,
    /// The clients' request timeout.
    pub request_timeout: Duration,
    /// How far past the timeout a completion may land before it counts as a hang.
    pub hang_grace: Duration,
    /// Longest time from the final heal until every node agrees.
    pub convergence_bound: Duration,
    /// Longest override the system may grant (2 h).
    pub max_override_duration_ms: u64,
    /// Clock slack between the runner and the ledger when judging override deadlines.
    pub expiry_tolerance: Duration,
    /// Reasons a failure may carry (a failure with any other reason is an unclear error).
    pub clear_error_reasons: Vec<String>,
    /// Reasons that are a correct refusal by policy (counted as answered, not unavailable).
    pub policy_rejections: Vec<String>,
    /// Minimum answered share per fault kind (`none` = outside fault windows).
    pub min_answered_share: BTreeMap<String, f64>,
    /// Operations the linearizability search takes at most (the first ones by invocation).
    pub linearizability_max_ops: usize,
    /// Search states the linearizability checker may visit before answering unknown.
    pub linearizability_max_states: usize,
}

impl Default for CheckConfig {
    fn default() -> Self {
        let reasons = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect();
        Self {
            budgets: BTreeMap::new(),
            budget_slack_tokens: 0,
            count_info_as_admitted: true,
            override_attribution: true,
            request_timeout: Duration::from_secs(5),
            hang_grace: Duration::from_secs(1),
            convergence_bound: Duration::from_secs(30),
            max_override_duration_ms: 2 * 60 * 60 * 1000,
            expiry_tolerance: Duration::from_secs(2),
            clear_error_reasons: reasons(&[
                "quota_exhausted",
                "quota_ledger_unreachable",
                "quota_ledger_pending",
                "not_leader",
                "overloaded",
                "no_worker",
                "upstream_timeout",
                "two_person_rule",
                "override_not_pending",
                "override_not_found",
                "override_invalid",
                "timeout",
                "connection_refused",
                "connection_reset",
                "client_timeout",
            ]),
            policy_rejections: reasons(&[
                "quota_exhausted",
                "two_person_rule",
                "override_not_pending",
                "override_not_found",
                "override_invalid",
            ]),
            min_answered_share: BTreeMap::new(),
            linearizability_max_ops: 200,
            linearizability_max_states: 2_000_000,
        }
    }
}

fn yes() -> bool {
    true
}

/// What the checkers read: the history paired into operations, and the final reads.
#[derive(Debug)]
pub struct CheckInput<'a> {
    pub history: &'a History,
    pub operations: Vec<Operation>,
    pub final_states: &'a FinalStates,
    pub config: &'a CheckConfig,
}

impl<'a> CheckInput<'a> {
    pub fn new(
        history: &'a History,
        final_states: &'a FinalStates,
        config: &'a CheckConfig,
    ) -> Result<Self, HistoryError> {
        Ok(Self {
            history,
            operations: history.operations()?,
            final_states,
            config,
        })
    }
}

pub trait Checker {
    fn name(&self) -> &'static str;
    fn check(&self, input: &CheckInput<'_>) -> Verdict;
}

/// Every checker of the suite, in report order.
pub fn all_checkers() -> Vec<Box<dyn Checker>> {
    vec![
        Box::new(BudgetSafetyChecker),
        Box::new(LostWritesChecker),
        Box::new(OverrideRulesChecker),
        Box::new(ConvergenceChecker),
        Box::new(AvailabilityChecker),
        Box::new(OverrideLinearizabilityChecker),
    ]
}

/// Runs every checker; a malformed history is reported as one invalid verdict.
pub fn check_all(
    history: &History,
    final_states: &FinalStates,
    config: &CheckConfig,
) -> Vec<Verdict> {
    match CheckInput::new(history, final_states, config) {
        Ok(input) => all_checkers().iter().map(|c| c.check(&input)).collect(),
        Err(e) => vec![Verdict::from_findings(
            "history",
            vec![Violation::new(e.to_string(), Vec::new())],
            Vec::new(),
            false,
        )],
    }
}

/// At most this many operations are attached to one violation (the report stays readable).
pub const MAX_OPS_PER_VIOLATION: usize = 12;

pub(crate) fn cap_ops(mut ops: Vec<Operation>) -> Vec<Operation> {
    ops.truncate(MAX_OPS_PER_VIOLATION);
    ops
}
