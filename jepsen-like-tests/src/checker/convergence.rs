//! Convergence: after the final heal every node can be read and all agree on budgets, leases,
//! accounting, overrides, affinity and applied reports, within the configured bound.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;

use super::verdict::{CheckInput, Checker, Verdict, Violation};
use crate::NodeId;
use crate::state::NodeState;

pub struct ConvergenceChecker;

/// At most this many differing keys are named per section.
const MAX_KEYS_SHOWN: usize = 5;

fn differing_keys<K: Ord + Debug, V: PartialEq>(
    a: &BTreeMap<K, V>,
    b: &BTreeMap<K, V>,
) -> Vec<String> {
    let keys: BTreeSet<&K> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| format!("{k:?}"))
        .collect()
}

/// Which sections of two states differ, naming a few keys of each.
pub(crate) fn describe_difference(a: &NodeState, b: &NodeState) -> String {
    let mut sections = Vec::new();
    let mut section = |name: &str, keys: Vec<String>| {
        if !keys.is_empty() {
            let shown: Vec<&str> = keys
                .iter()
                .take(MAX_KEYS_SHOWN)
                .map(String::as_str)
                .collect();
            let more = keys.len().saturating_sub(MAX_KEYS_SHOWN);
            let tail = if more > 0 {
                format!(" (+{more} more)")
            } else {
                String::new()
            };
            sections.push(format!("{name} [{}]{tail}", shown.join(", ")));
        }
    };
    section("budgets", differing_keys(&a.budgets, &b.budgets));
    section(
        "accounting",
        differing_keys(&a.accounted_tokens, &b.accounted_tokens),
    );
    section("leases", differing_keys(&a.leases, &b.leases));
    section("overrides", differing_keys(&a.overrides, &b.overrides));
    section("affinity", differing_keys(&a.affinity, &b.affinity));
    if a.spend_reports != b.spend_reports {
        section("spend reports", vec!["(sets differ)".to_owned()]);
    }
    sections.join("; ")
}

impl Checker for ConvergenceChecker {
    fn name(&self) -> &'static str {
        "convergence"
    }

    fn check(&self, input: &CheckInput<'_>) -> Verdict {
        let finals = input.final_states;
        let mut violations = Vec::new();
        let mut notes = Vec::new();
        for (node, read) in &finals.nodes {
            if let Err(e) = &read.state {
                violations.push(Violation::new(
                    format!("node {node} could not be read after the heal: {e}"),
                    Vec::new(),
                ));
            }
        }
        let mut groups: Vec<(NodeState, Vec<NodeId>)> = Vec::new();
        for (node, state) in finals.readable() {
            let replicated = state.replicated_part();
            match groups.iter_mut().find(|(s, _)| *s == replicated) {
                Some((_, members)) => members.push(node),
                None => groups.push((replicated, vec![node])),
            }
        }
        if let Some(((reference, ref_nodes), others)) = groups.split_first() {
            for (state, members) in others {
                violations.push(Violation::new(
                    format!(
                        "nodes {members:?} disagree with nodes {ref_nodes:?}: {}",
                        describe_difference(reference, state)
                    ),
                    Vec::new(),
                ));
            }
        }
        let bound = input.config.convergence_bound;
        // Agreement is timed from the later of the heal and the end of client traffic: nodes
        // busy with the recovery-phase workload are not expected to be idle-identical.
        let settled_from = match (finals.healed_at_ns, finals.quiesced_at_ns) {
            (Some(healed), Some(quiesced)) => Some(healed.max(quiesced)),
            (healed, _) => healed,
        };
        match (settled_from, finals.converged_at_ns) {
            (Some(healed), Some(converged)) => {
                let took = converged.saturating_sub(healed);
                notes.push(format!(
                    "nodes agreed {:.3}s after the heal and the end of traffic (bound {:.0}s)",
                    took as f64 / 1e9,
                    bound.as_secs_f64()
                ));
                if u128::from(took) > bound.as_nanos() {
                    violations.push(Violation::new(
                        format!(
                            "nodes took {:.3}s after the heal to agree, over the {:.0}s bound",
                            took as f64 / 1e9,
                            bound.as_secs_f64()
                        ),
                        Vec::new(),
                    ));
                }
            }
            (Some(_), None) if violations.is_empty() => violations.push(Violation::new(
                "the runner never saw the nodes agree within the bound",
                Vec::new(),
            )),
            (None, _) => notes.push("no final heal recorded; agreement time not judged".into()),
            _ => {}
        }
        let undecided = finals.nodes.is_empty();
        if undecided {
            notes.push("no node was read".into());
        }
        Verdict::from_findings(self.name(), violations, notes, undecided)
    }
}
