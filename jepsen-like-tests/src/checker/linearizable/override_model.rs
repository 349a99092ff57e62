//! The override registry as a sequential specification: a set of records (one register per
//! id holding its status) that proposals add to, approvals and revocations move, and listings
//! read whole.
//!
//! Time is not modelled: an unapproved or active override may expire between any two
//! operations, which the model allows lazily, when a listing first shows it expired. An
//! unknown-outcome proposal creates a "ghost" whose id is learnt when an operation first
//! names an id nobody was told about.

use std::collections::BTreeMap;

use super::engine::{Linearization, Model, SearchLimits, search, truncate};
use crate::checker::verdict::{CheckInput, Checker, Verdict, Violation, cap_ops};
use crate::history::{Op, OpResult, Operation, OverrideView};
use crate::state::OverrideStatus;

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Record {
    pub status: OverrideStatus,
    pub requester: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Registry {
    records: BTreeMap<u64, Record>,
    /// Unknown-outcome proposals placed in the order but whose id is not known yet.
    ghosts: u32,
}

fn same_principal(a: &str, b: &str) -> bool {
    a.trim().eq_ignore_ascii_case(b.trim())
}

impl Registry {
    /// The states in which `id` exists: as recorded, or bound to a ghost proposal.
    fn resolve(&self, id: u64) -> Option<Registry> {
        if self.records.contains_key(&id) {
            return Some(self.clone());
        }
        if self.ghosts == 0 {
            return None;
        }
        let mut bound = self.clone();
        bound.ghosts -= 1;
        bound.records.insert(
            id,
            Record {
                status: OverrideStatus::Pending,
                requester: None,
            },
        );
        Some(bound)
    }

    fn transition(
        &self,
        id: u64,
        apply: impl Fn(&Record) -> Option<OverrideStatus>,
    ) -> Vec<Registry> {
        let Some(mut next) = self.resolve(id) else {
            return Vec::new();
        };
        let Some(record) = next.records.get_mut(&id) else {
            return Vec::new();
        };
        match apply(record) {
            Some(status) => {
                record.status = status;
                vec![next]
            }
            None => Vec::new(),
        }
    }

    fn listing(&self, listed: &[OverrideView]) -> Vec<Registry> {
        let unknown = listed
            .iter()
            .filter(|v| !self.records.contains_key(&v.id))
            .count();
        if unknown as u64 != u64::from(self.ghosts) || listed.len() != self.records.len() + unknown
        {
            return Vec::new();
        }
        let mut next = Registry {
            records: self.records.clone(),
            ghosts: 0,
        };
        for view in listed {
            let record = next.records.entry(view.id).or_insert_with(|| Record {
                status: OverrideStatus::Pending,
                requester: Some(view.requester.clone()),
            });
            let requester_matches = record
                .requester
                .as_deref()
                .is_none_or(|r| same_principal(r, &view.requester));
            let status_reachable = record.status == view.status
                || (view.status == OverrideStatus::Expired
                    && matches!(
                        record.status,
                        OverrideStatus::Pending | OverrideStatus::Active
                    ));
            if !requester_matches || !status_reachable {
                return Vec::new();
            }
            record.status = view.status;
            record.requester = Some(view.requester.clone());
        }
        vec![next]
    }
}

pub struct OverrideRegistryModel;

impl Model for OverrideRegistryModel {
    type State = Registry;

    fn initial(&self) -> Registry {
        Registry::default()
    }

    fn step(&self, state: &Registry, op: &Operation) -> Vec<Registry> {
        match (op.op(), op.result()) {
            (Op::ProposeOverride { requester, .. }, Some(OpResult::Proposed { id })) => {
                let fresh = state.records.keys().next_back().is_none_or(|max| id > max);
                if !fresh {
                    return Vec::new();
                }
                let mut next = state.clone();
                next.records.insert(
                    *id,
                    Record {
                        status: OverrideStatus::Pending,
                        requester: Some(requester.clone()),
                    },
                );
                vec![next]
            }
            (Op::ProposeOverride { .. }, None) => {
                let mut next = state.clone();
                next.ghosts += 1;
                vec![next]
            }
            (Op::ApproveOverride { id, approver }, None | Some(OpResult::Approved)) => state
                .transition(*id, |r| {
                    let own = r
                        .requester
                        .as_deref()
                        .is_some_and(|q| same_principal(q, approver));
                    (r.status == OverrideStatus::Pending && !own).then_some(OverrideStatus::Active)
                }),
            (Op::RevokeOverride { id, .. }, None | Some(OpResult::Revoked)) => {
                state.transition(*id, |r| {
                    matches!(r.status, OverrideStatus::Pending | OverrideStatus::Active)
                        .then_some(OverrideStatus::Revoked)
                })
            }
            (Op::ListOverrides, Some(OpResult::Overrides { records })) => state.listing(records),
            // An unknown-outcome listing tells nothing; a result of the wrong shape is impossible.
            _ => Vec::new(),
        }
    }
}

pub struct OverrideLinearizabilityChecker;

impl Checker for OverrideLinearizabilityChecker {
    fn name(&self) -> &'static str {
        "override-linearizability"
    }

    fn check(&self, input: &CheckInput<'_>) -> Verdict {
        let relevant: Vec<Operation> = input
            .operations
            .iter()
            .filter(|op| op.op().is_override_op() && op.outcome().maybe_happened())
            .cloned()
            .collect();
        let limits = SearchLimits {
            max_ops: input.config.linearizability_max_ops,
            max_states: input.config.linearizability_max_states,
        };
        let ops = truncate(&relevant, limits.max_ops);
        let mut notes = vec![format!(
            "{} of {} override operations searched",
            ops.len(),
            relevant.len()
        )];
        let by_id: BTreeMap<u64, &Operation> = ops.iter().map(|op| (op.id(), op)).collect();
        let pick = |ids: &[u64]| -> Vec<Operation> {
            ids.iter()
                .filter_map(|id| by_id.get(id))
                .map(|op| (*op).clone())
                .collect()
        };
        match search(&OverrideRegistryModel, &ops, &limits) {
            Linearization::Linearizable { .. } => {
                Verdict::from_findings(self.name(), Vec::new(), notes, false)
            }
            Linearization::NotLinearizable { linearized, stuck } => {
                let tail: Vec<u64> = linearized.iter().rev().take(4).rev().copied().collect();
                let mut shown = pick(&stuck);
                shown.extend(pick(&tail));
                let violation = Violation::new(
                    format!(
                        "no linearization explains the override registry history: after the \
                         longest valid prefix ({} ops, last shown), none of the stuck \
                         operations {stuck:?} can take effect",
                        linearized.len()
                    ),
                    cap_ops(shown),
                );
                Verdict::from_findings(self.name(), vec![violation], notes, false)
            }
            Linearization::Unknown { reason } => {
                notes.push(reason);
                Verdict::from_findings(self.name(), Vec::new(), notes, true)
            }
        }
    }
}
