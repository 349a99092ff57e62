//! Override rules: the approver is never the requester, an override is not used
//! before approval nor after its deadline or revocation, and it is never renewed (approved
//! twice, or granted longer than the maximum). And the system's answers are true: an
//! approval or revocation answered as refused must not have taken effect.
//!
//! Deadlines are judged on the runner's clock: an approval acknowledged at `t` took effect no
//! later than `t`, so its override must be over by `t + duration` (plus a clock tolerance).

use std::collections::BTreeMap;

use super::verdict::{CheckInput, Checker, Verdict, Violation};
use crate::history::{Op, OpResult, Operation, Outcome};
use crate::state::OverrideStatus;

pub struct OverrideRulesChecker;

fn same_principal(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

#[derive(Default)]
struct Known<'a> {
    proposal: Option<&'a Operation>,
    requester: Option<String>,
    duration_ms: Option<u64>,
    approvals: Vec<&'a Operation>,
    maybe_approved: bool,
    revocations: Vec<&'a Operation>,
    /// Approvals and revocations answered as refused (definitely no effect).
    refused_approvals: Vec<&'a Operation>,
    refused_revocations: Vec<&'a Operation>,
    /// Principals whose approval or revocation may have taken effect.
    approvers_maybe: Vec<String>,
    revokers_maybe: usize,
}

fn collect<'i>(input: &'i CheckInput<'_>) -> BTreeMap<u64, Known<'i>> {
    let mut known: BTreeMap<u64, Known<'i>> = BTreeMap::new();
    for op in &input.operations {
        match (op.op(), op.result()) {
            (
                Op::ProposeOverride {
                    requester,
                    duration_ms,
                    ..
                },
                Some(OpResult::Proposed { id }),
            ) => {
                let entry = known.entry(*id).or_default();
                entry.proposal = Some(op);
                entry.requester = Some(requester.clone());
                entry.duration_ms = Some(*duration_ms);
            }
            (Op::ApproveOverride { id, approver }, _) if op.outcome().maybe_happened() => {
                let entry = known.entry(*id).or_default();
                entry.maybe_approved = true;
                entry.approvers_maybe.push(approver.clone());
                if op.outcome() == Outcome::Ok {
                    entry.approvals.push(op);
                }
            }
            (Op::ApproveOverride { id, .. }, _) => {
                known.entry(*id).or_default().refused_approvals.push(op);
            }
            (Op::RevokeOverride { id, .. }, _) if op.outcome().maybe_happened() => {
                let entry = known.entry(*id).or_default();
                entry.revokers_maybe += 1;
                if op.outcome() == Outcome::Ok {
                    entry.revocations.push(op);
                }
            }
            (Op::RevokeOverride { id, .. }, _) => {
                known.entry(*id).or_default().refused_revocations.push(op);
            }
            _ => {}
        }
    }
    for (_, state) in input.final_states.readable() {
        for (id, record) in &state.overrides {
            let entry = known.entry(*id).or_default();
            entry
                .requester
                .get_or_insert_with(|| record.requester.clone());
            entry.duration_ms.get_or_insert(record.duration_ms);
            if record.approver.is_some() {
                entry.maybe_approved = true;
            }
        }
    }
    known
}

fn with_proposal(known: &Known<'_>, ops: &[&Operation]) -> Vec<Operation> {
    known
        .proposal
        .into_iter()
        .chain(ops.iter().copied())
        .cloned()
        .collect()
}

/// Changes the final state shows that only an attempt answered as refused can explain.
fn refused_but_applied(input: &CheckInput<'_>, known: &BTreeMap<u64, Known<'_>>) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut reported = std::collections::BTreeSet::new();
    for (node, state) in input.final_states.readable() {
        for (id, record) in &state.overrides {
            let Some(k) = known.get(id) else { continue };
            if let Some(approver) = &record.approver {
                let explained = k
                    .approvers_maybe
                    .iter()
                    .any(|a| same_principal(a, approver));
                let refused: Vec<&Operation> = k
                    .refused_approvals
                    .iter()
                    .copied()
                    .filter(|op| {
                        matches!(op.op(), Op::ApproveOverride { approver: a, .. } if same_principal(a, approver))
                    })
                    .collect();
                if !explained && !refused.is_empty() && reported.insert((*id, "approve")) {
                    violations.push(Violation::new(
                        format!(
                            "node {node}: override {id} was approved by {approver}, whose every \
                             approval was answered as refused (a refusal that took effect)"
                        ),
                        with_proposal(k, &refused),
                    ));
                }
            }
            if record.status == OverrideStatus::Revoked
                && k.revokers_maybe == 0
                && !k.refused_revocations.is_empty()
                && reported.insert((*id, "revoke"))
            {
                violations.push(Violation::new(
                    format!(
                        "node {node}: override {id} is revoked, but every revocation was answered \
                         as refused (a refusal that took effect)"
                    ),
                    with_proposal(k, &k.refused_revocations),
                ));
            }
        }
    }
    violations
}

impl OverrideRulesChecker {
    fn grants(&self, input: &CheckInput<'_>, known: &BTreeMap<u64, Known<'_>>) -> Vec<Violation> {
        let max = input.config.max_override_duration_ms;
        let mut violations = Vec::new();
        for (id, k) in known {
            if let Some(requester) = &k.requester {
                for approval in &k.approvals {
                    let Op::ApproveOverride { approver, .. } = approval.op() else {
                        continue;
                    };
                    if same_principal(approver, requester) {
                        violations.push(Violation::new(
                            format!("override {id} was approved by its own requester {requester}"),
                            with_proposal(k, &[approval]),
                        ));
                    }
                }
            }
            if k.approvals.len() > 1 {
                violations.push(Violation::new(
                    format!(
                        "override {id} was approved {} times (renewal)",
                        k.approvals.len()
                    ),
                    with_proposal(k, &k.approvals),
                ));
            }
            if let Some(duration) = k.duration_ms.filter(|d| *d > max) {
                if k.maybe_approved || k.proposal.is_some() {
                    violations.push(Violation::new(
                        format!("override {id} was granted for {duration} ms, above the {max} ms maximum"),
                        with_proposal(k, &[]),
                    ));
                }
            }
        }
        for (node, state) in input.final_states.readable() {
            for (id, record) in &state.overrides {
                if let Some(approver) = &record.approver {
                    if same_principal(approver, &record.requester) {
                        violations.push(Violation::new(
                            format!(
                                "node {node}: override {id} records {approver} as both requester and approver"
                            ),
                            Vec::new(),
                        ));
                    }
                }
            }
        }
        violations
    }

    fn uses(&self, input: &CheckInput<'_>, known: &BTreeMap<u64, Known<'_>>) -> Vec<Violation> {
        let tolerance = u64::try_from(input.config.expiry_tolerance.as_nanos()).unwrap_or(u64::MAX);
        let mut violations = Vec::new();
        for op in input
            .operations
            .iter()
            .filter(|op| op.outcome() == Outcome::Ok)
        {
            let used: Vec<(u64, bool)> = match (op.op(), op.result()) {
                (
                    _,
                    Some(OpResult::Spent {
                        override_id: Some(id),
                        ..
                    }),
                ) => vec![(*id, true)],
                (Op::ListOverrides, Some(OpResult::Overrides { records })) => records
                    .iter()
                    .filter(|r| r.status == OverrideStatus::Active)
                    .map(|r| (r.id, false))
                    .collect(),
                _ => continue,
            };
            for (id, is_spend) in used {
                let what = if is_spend {
                    "spent under"
                } else {
                    "listed as active"
                };
                let Some(k) = known.get(&id).filter(|k| k.maybe_approved) else {
                    violations.push(Violation::new(
                        format!("override {id} {what} but never approved"),
                        vec![op.clone()],
                    ));
                    continue;
                };
                let first_approval_start = k.approvals.iter().map(|a| a.start_ns()).min();
                if let Some(start) = first_approval_start {
                    if op.ok_end_or_max() < start {
                        violations.push(Violation::new(
                            format!("override {id} {what} before its approval was even sent"),
                            with_proposal(k, &[op]),
                        ));
                    }
                }
                let deadline = k
                    .approvals
                    .iter()
                    .filter_map(|a| a.end_ns())
                    .min()
                    .zip(k.duration_ms)
                    .map(|(approved, ms)| approved.saturating_add(ms.saturating_mul(1_000_000)));
                if let Some(deadline) = deadline {
                    if op.start_ns() > deadline.saturating_add(tolerance) {
                        violations.push(Violation::new(
                            format!(
                                "override {id} {what} {:.3}s after its deadline (no use after expiry)",
                                (op.start_ns() - deadline) as f64 / 1e9
                            ),
                            with_proposal(k, &[op]),
                        ));
                    }
                }
                let revoked = k.revocations.iter().filter_map(|r| r.end_ns()).min();
                if let Some(revoked) = revoked {
                    if op.start_ns() > revoked.saturating_add(tolerance) {
                        violations.push(Violation::new(
                            format!("override {id} {what} after it was revoked"),
                            with_proposal(k, &[op]),
                        ));
                    }
                }
            }
        }
        violations
    }
}

impl Checker for OverrideRulesChecker {
    fn name(&self) -> &'static str {
        "override-rules"
    }

    fn check(&self, input: &CheckInput<'_>) -> Verdict {
        let known = collect(input);
        let mut violations = self.grants(input, &known);
        violations.extend(self.uses(input, &known));
        violations.extend(refused_but_applied(input, &known));
        let notes = vec![format!(
            "{} override(s) seen; {} approval(s) acknowledged",
            known.len(),
            known.values().map(|k| k.approvals.len()).sum::<usize>()
        )];
        Verdict::from_findings(self.name(), violations, notes, false)
    }
}
