//! Budget safety: the tokens admitted for a scope never exceed its budget plus the overrides
//! approved on it; spend not drawn from an override never exceeds the budget itself, and
//! spend drawn from an override never exceeds what it granted. Acknowledged spends over a
//! cap are a violation. Unknown-outcome spends
//! count as possibly admitted (at their reserved maximum): if they could push the total past
//! the cap, that is a violation too, unless every node's ledger shows it accounted no more
//! than the cap (the ledger charges leases when granted, so whatever was really admitted,
//! acknowledged or not, is inside its accounting; lost-writes checks that accounting covers
//! every acknowledged spend).

use std::collections::BTreeMap;
use switchyard_core::QuotaScope;

use super::verdict::{CheckInput, Checker, Verdict, Violation, cap_ops};
use crate::history::{Op, OpResult, Operation, Outcome};
use crate::state::{scope_covers, scopes_overlap};

pub struct BudgetSafetyChecker;

/// Overrides that may have been approved: id → (scope, extra tokens). Generous on purpose
/// (any approval that may have happened, any node's record): allowance errs towards valid.
fn approved_overrides(input: &CheckInput<'_>) -> BTreeMap<u64, (QuotaScope, u64)> {
    let mut proposed: BTreeMap<u64, (QuotaScope, u64)> = BTreeMap::new();
    for op in &input.operations {
        if let (
            Op::ProposeOverride {
                scope,
                extra_tokens,
                ..
            },
            Some(OpResult::Proposed { id }),
        ) = (op.op(), op.result())
        {
            proposed.insert(*id, (scope.clone(), *extra_tokens));
        }
    }
    let mut approved = BTreeMap::new();
    for (_, state) in input.final_states.readable() {
        for (id, record) in &state.overrides {
            proposed
                .entry(*id)
                .or_insert_with(|| (record.scope.clone(), record.extra_tokens));
            if record.approver.is_some() {
                approved.insert(*id, (record.scope.clone(), record.extra_tokens));
            }
        }
    }
    for op in &input.operations {
        let Op::ApproveOverride { id, .. } = op.op() else {
            continue;
        };
        if !op.outcome().maybe_happened() {
            continue;
        }
        if let Some(grant) = proposed.get(id) {
            approved.insert(*id, grant.clone());
        }
    }
    approved
}

/// Tokens an admitted spend used: the settled count, or the reservation if none was reported.
fn ok_tokens(op: &Operation, max_tokens: u64) -> u64 {
    match op.result() {
        Some(OpResult::Spent { tokens, .. }) => *tokens,
        _ => max_tokens,
    }
}

/// Every node's own accounting must stay within the cap too.
fn check_node_accounting(
    violations: &mut Vec<Violation>,
    input: &CheckInput<'_>,
    scope: &QuotaScope,
    cap: u64,
) {
    for (node, state) in input.final_states.readable() {
        if let Some(budget) = state.budgets.get(scope) {
            let committed = budget.spent.saturating_add(budget.held);
            if committed > cap {
                violations.push(Violation::new(
                    format!(
                        "{scope}: node {node} accounts {} spent + {} held = {committed}, \
                         above the cap of {cap}",
                        budget.spent, budget.held
                    ),
                    Vec::new(),
                ));
            }
        }
    }
}

/// The acknowledged and unknown-outcome spends covered by `scope`.
struct ScopeSpend<'a> {
    /// (completion time, tokens, op), in completion order.
    admitted: Vec<(u64, u64, &'a Operation)>,
    unknown: Vec<&'a Operation>,
    unknown_tokens: u64,
}

fn spends_in<'a>(input: &'a CheckInput<'_>, scope: &QuotaScope) -> ScopeSpend<'a> {
    let mut spend = ScopeSpend {
        admitted: Vec::new(),
        unknown: Vec::new(),
        unknown_tokens: 0,
    };
    for op in &input.operations {
        let Op::Spend {
            caller,
            purpose,
            max_tokens,
            ..
        } = op.op()
        else {
            continue;
        };
        if !scope_covers(scope, caller, *purpose) {
            continue;
        }
        match op.outcome() {
            Outcome::Ok => {
                spend
                    .admitted
                    .push((op.ok_end_or_max(), ok_tokens(op, *max_tokens), op))
            }
            Outcome::Info | Outcome::Pending => {
                spend.unknown_tokens = spend.unknown_tokens.saturating_add(*max_tokens);
                spend.unknown.push(op);
            }
            Outcome::Fail => {}
        }
    }
    spend.admitted.sort_by_key(|(end, _, op)| (*end, op.id()));
    spend
}

/// Acknowledged spend past `cap`: the admissions that went past it.
fn over_cap(spend: &ScopeSpend<'_>, scope: &QuotaScope, cap: u64) -> Option<Violation> {
    let total: u64 = spend.admitted.iter().map(|(_, tokens, _)| *tokens).sum();
    if total <= cap {
        return None;
    }
    let mut running = 0u64;
    let over: Vec<Operation> = spend
        .admitted
        .iter()
        .filter_map(|(_, tokens, op)| {
            running = running.saturating_add(*tokens);
            (running > cap).then(|| (*op).clone())
        })
        .collect();
    Some(Violation::new(
        format!(
            "{scope}: {total} acknowledged tokens exceed the cap of {cap} by {}; these \
             admissions went past it",
            total - cap
        ),
        cap_ops(over),
    ))
}

/// Acknowledged spend not drawn from an override must fit the budget itself.
fn own_pool_over(
    spend: &ScopeSpend<'_>,
    scope: &QuotaScope,
    limit: u64,
    slack: u64,
) -> Option<Violation> {
    let own: Vec<&Operation> = spend
        .admitted
        .iter()
        .filter(|(_, _, op)| override_of(op).is_none())
        .map(|(_, _, op)| *op)
        .collect();
    let total: u64 = own.iter().map(|op| ok_tokens(op, 0)).sum();
    (total > limit.saturating_add(slack)).then(|| {
        Violation::new(
            format!(
                "{scope}: {total} acknowledged tokens not drawn from any override exceed the \
                 budget of {limit} itself"
            ),
            cap_ops(own.iter().rev().map(|op| (*op).clone()).collect()),
        )
    })
}

impl BudgetSafetyChecker {
    fn check_scope(
        &self,
        input: &CheckInput<'_>,
        (scope, limit): (&QuotaScope, u64),
        approved: &BTreeMap<u64, (QuotaScope, u64)>,
        violations: &mut Vec<Violation>,
        notes: &mut Vec<String>,
    ) {
        let config = input.config;
        let allowance: u64 = approved
            .values()
            .filter(|(o_scope, _)| scopes_overlap(o_scope, scope))
            .map(|(_, extra)| *extra)
            .sum();
        let cap = limit
            .saturating_add(allowance)
            .saturating_add(config.budget_slack_tokens);
        let spend = spends_in(input, scope);
        let ok_total: u64 = spend.admitted.iter().map(|(_, tokens, _)| *tokens).sum();
        notes.push(format!(
            "{scope}: {ok_total} tokens acknowledged + {} unknown, cap {cap} (budget {limit} + \
             overrides {allowance} + slack {})",
            spend.unknown_tokens, config.budget_slack_tokens
        ));
        if let Some(violation) = over_cap(&spend, scope, cap) {
            violations.push(violation);
        } else if config.count_info_as_admitted
            && ok_total.saturating_add(spend.unknown_tokens) > cap
        {
            // The ledgers bound what was admitted, unknown outcomes included (leases are
            // charged when granted); lost-writes checks that they cover every acknowledged
            // spend. If every ledger stays within the cap, not all unknown ops were admitted.
            let ledgers: Vec<u64> = input
                .final_states
                .readable()
                .filter_map(|(_, state)| state.budgets.get(scope))
                .map(|b| b.spent.saturating_add(b.held))
                .collect();
            match ledgers.iter().max().filter(|max| **max <= cap) {
                Some(max) => notes.push(format!(
                    "{scope}: unknown-outcome spends could pass the cap, but every node's ledger \
                     accounts at most {max}: not all of them were admitted"
                )),
                None => violations.push(Violation::new(
                    format!(
                        "{scope}: {ok_total} acknowledged + {} possibly admitted (unknown \
                         outcome) tokens exceed the cap of {cap}",
                        spend.unknown_tokens
                    ),
                    cap_ops(spend.unknown.iter().map(|op| (*op).clone()).collect()),
                )),
            }
        }
        if config.override_attribution {
            violations.extend(own_pool_over(
                &spend,
                scope,
                limit,
                config.budget_slack_tokens,
            ));
        }
        check_node_accounting(violations, input, scope, cap);
    }
}

impl Checker for BudgetSafetyChecker {
    fn name(&self) -> &'static str {
        "budget-safety"
    }

    fn check(&self, input: &CheckInput<'_>) -> Verdict {
        if input.config.budgets.is_empty() {
            return Verdict::from_findings(
                self.name(),
                Vec::new(),
                vec!["no budgets were configured, nothing to judge".to_owned()],
                true,
            );
        }
        let approved = approved_overrides(input);
        let mut violations = Vec::new();
        let mut notes = Vec::new();
        for (scope, &limit) in &input.config.budgets {
            self.check_scope(
                input,
                (scope, limit),
                &approved,
                &mut violations,
                &mut notes,
            );
        }
        if input.config.override_attribution {
            check_override_pools(input, &approved, &mut violations);
        } else {
            notes.push(
                "spends do not say which override paid: per-pool rules (budget alone, each \
                 override within its grant) not judged"
                    .to_owned(),
            );
        }
        Verdict::from_findings(self.name(), violations, notes, false)
    }
}

fn override_of(op: &Operation) -> Option<u64> {
    match op.result() {
        Some(OpResult::Spent { override_id, .. }) => *override_id,
        _ => None,
    }
}

/// Spend drawn from one override never exceeds the extra tokens it granted.
fn check_override_pools(
    input: &CheckInput<'_>,
    approved: &BTreeMap<u64, (QuotaScope, u64)>,
    violations: &mut Vec<Violation>,
) {
    let mut drawn: BTreeMap<u64, Vec<&Operation>> = BTreeMap::new();
    for op in input
        .operations
        .iter()
        .filter(|op| op.outcome() == Outcome::Ok)
    {
        if let Some(id) = override_of(op) {
            drawn.entry(id).or_default().push(op);
        }
    }
    for (id, ops) in drawn {
        let Some((scope, extra)) = approved.get(&id) else {
            continue; // never approved: the override-rules checker reports it
        };
        let total: u64 = ops.iter().map(|op| ok_tokens(op, 0)).sum();
        if total > *extra {
            violations.push(Violation::new(
                format!(
                    "override {id} on {scope} granted {extra} tokens but {total} were drawn from it"
                ),
                cap_ops(ops.iter().rev().map(|op| (*op).clone()).collect()),
            ));
        }
    }
}
