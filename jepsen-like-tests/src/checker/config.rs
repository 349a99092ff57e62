//! The checkers' parameters ([`CheckConfig`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use switchyard_core::QuotaScope;

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
