//! No lost acknowledged writes: every acknowledged spend, spend report, override change and
//! affinity record must be visible in the final state of every node that could be read.

use std::collections::BTreeMap;

use super::verdict::{CheckInput, Checker, Verdict, Violation, cap_ops};
use crate::NodeId;
use crate::history::{Op, OpResult, Operation, Outcome};
use crate::state::{NodeState, OverrideStatus, ReportId, scope_covers};

pub struct LostWritesChecker;

fn acked(ops: &[Operation]) -> impl Iterator<Item = &Operation> {
    ops.iter().filter(|op| op.outcome() == Outcome::Ok)
}

fn check_spend(
    ops: &[Operation],
    node: NodeId,
    state: &NodeState,
    violations: &mut Vec<Violation>,
) {
    for (scope, &accounted) in &state.accounted_tokens {
        let covered: Vec<&Operation> = acked(ops)
            .filter(|op| match op.op() {
                Op::Spend {
                    caller, purpose, ..
                } => scope_covers(scope, caller, *purpose),
                _ => false,
            })
            .collect();
        let total: u64 = covered
            .iter()
            .map(|op| match (op.op(), op.result()) {
                (_, Some(OpResult::Spent { tokens, .. })) => *tokens,
                (Op::Spend { max_tokens, .. }, _) => *max_tokens,
                _ => 0,
            })
            .sum();
        if accounted < total {
            let recent = covered.iter().rev().map(|op| (*op).clone()).collect();
            violations.push(Violation::new(
                format!(
                    "node {node} accounts {accounted} tokens to {scope}, but {total} were \
                     acknowledged: {} tokens lost (latest acknowledged spends shown)",
                    total - accounted
                ),
                cap_ops(recent),
            ));
        }
    }
}

fn check_reports(
    ops: &[Operation],
    node: NodeId,
    state: &NodeState,
    violations: &mut Vec<Violation>,
) {
    let Some(applied) = &state.spend_reports else {
        return;
    };
    let missing: Vec<Operation> = acked(ops)
        .filter(|op| match op.op() {
            Op::ReportSpend { reporter, seq, .. } => !applied.contains(&ReportId {
                reporter: reporter.clone(),
                seq: *seq,
            }),
            _ => false,
        })
        .cloned()
        .collect();
    if !missing.is_empty() {
        violations.push(Violation::new(
            format!(
                "node {node} lacks {} acknowledged spend report(s)",
                missing.len()
            ),
            cap_ops(missing),
        ));
    }
}

/// What an acknowledged override change requires of the final record, or `None` if it holds.
fn override_loss(op: &Operation, state: &NodeState) -> Option<String> {
    match (op.op(), op.result()) {
        (
            Op::ProposeOverride {
                scope,
                extra_tokens,
                requester,
                ..
            },
            Some(OpResult::Proposed { id }),
        ) => match state.overrides.get(id) {
            None => Some(format!("acknowledged proposal {id} is missing")),
            Some(record)
                if record.scope != *scope
                    || record.extra_tokens != *extra_tokens
                    || record.requester != *requester =>
            {
                Some(format!(
                    "proposal {id} reads back as {} +{} by {}, not as acknowledged",
                    record.scope, record.extra_tokens, record.requester
                ))
            }
            Some(_) => None,
        },
        (Op::ApproveOverride { id, approver }, _) => match state.overrides.get(id) {
            None => Some(format!("approved override {id} is missing")),
            Some(record) if record.status == OverrideStatus::Pending => {
                Some(format!("acknowledged approval of {id} lost: still pending"))
            }
            Some(record) if record.approver.as_deref() != Some(approver.as_str()) => Some(format!(
                "override {id} shows approver {:?}, acknowledged approver was {approver}",
                record.approver
            )),
            Some(_) => None,
        },
        (Op::RevokeOverride { id, .. }, _) => match state.overrides.get(id) {
            None => Some(format!("revoked override {id} is missing")),
            Some(record) if record.status != OverrideStatus::Revoked => Some(format!(
                "acknowledged revocation of {id} lost: status is {:?}",
                record.status
            )),
            Some(_) => None,
        },
        _ => None,
    }
}

fn check_overrides(
    ops: &[Operation],
    node: NodeId,
    state: &NodeState,
    violations: &mut Vec<Violation>,
) {
    for op in acked(ops).filter(|op| op.op().is_override_op()) {
        if let Some(problem) = override_loss(op, state) {
            violations.push(Violation::new(
                format!("node {node}: {problem}"),
                vec![op.clone()],
            ));
        }
    }
}

/// Last-writer-wins per prefix: the final worker must come from a write that no acknowledged
/// write to the same prefix followed in real time.
fn check_affinity(
    ops: &[Operation],
    node: NodeId,
    state: &NodeState,
    violations: &mut Vec<Violation>,
) {
    let mut writes: BTreeMap<u64, Vec<&Operation>> = BTreeMap::new();
    for op in ops.iter().filter(|op| op.outcome().maybe_happened()) {
        if let Op::RecordAffinity { prefix_key, .. } = op.op() {
            writes.entry(*prefix_key).or_default().push(op);
        }
    }
    for (prefix, candidates) in writes {
        let acked: Vec<&Operation> = candidates
            .iter()
            .copied()
            .filter(|op| op.outcome() == Outcome::Ok)
            .collect();
        let final_worker = state.affinity.get(&prefix);
        let survivors = candidates.iter().filter(|w| {
            let end = w.ok_end_or_max();
            !acked.iter().any(|later| later.start_ns() > end)
        });
        let explained = final_worker.is_some_and(|worker| {
            survivors
                .clone()
                .any(|w| matches!(w.op(), Op::RecordAffinity { worker: v, .. } if v == worker))
        });
        if explained || (final_worker.is_none() && acked.is_empty()) {
            continue;
        }
        let message = match final_worker {
            None => format!("node {node}: acknowledged affinity of prefix {prefix} is missing"),
            Some(worker) => format!(
                "node {node}: prefix {prefix} maps to {worker}, which no surviving write set \
                 (an acknowledged later write was lost, or the value is invented)"
            ),
        };
        violations.push(Violation::new(
            message,
            cap_ops(acked.iter().rev().map(|op| (*op).clone()).collect()),
        ));
    }
}

impl Checker for LostWritesChecker {
    fn name(&self) -> &'static str {
        "lost-writes"
    }

    fn check(&self, input: &CheckInput<'_>) -> Verdict {
        let ops = &input.operations;
        let mut violations = Vec::new();
        let mut notes = Vec::new();
        let readable: Vec<(NodeId, &NodeState)> = input.final_states.readable().collect();
        for (node, read) in &input.final_states.nodes {
            if let Err(e) = &read.state {
                notes.push(format!("node {node} could not be read ({e}); not checked"));
            }
        }
        if readable.iter().all(|(_, s)| s.accounted_tokens.is_empty())
            && acked(ops).any(|op| matches!(op.op(), Op::Spend { .. }))
        {
            notes.push("no node exposes spend accounting: acknowledged spends not checked".into());
        }
        if readable.iter().all(|(_, s)| s.spend_reports.is_none()) {
            notes.push("no node exposes applied spend reports: reports not checked".into());
        }
        for (node, state) in &readable {
            check_spend(ops, *node, state, &mut violations);
            check_reports(ops, *node, state, &mut violations);
            check_overrides(ops, *node, state, &mut violations);
            check_affinity(ops, *node, state, &mut violations);
        }
        notes.push(format!(
            "{} acknowledged writes checked against {} node(s)",
            acked(ops)
                .filter(|op| !matches!(op.op(), Op::ListOverrides | Op::ReadSpend { .. }))
                .count(),
            readable.len()
        ));
        Verdict::from_findings(self.name(), violations, notes, readable.is_empty())
    }
}
