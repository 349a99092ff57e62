//! Availability: the share of requests answered during each kind of fault window, and that
//! failures were clean: every failure names a known reason, nothing hangs past the client
//! timeout, and no 500 arrives without a cause. Requests to a node while it was paused
//! (SIGSTOP) are exempt from the hang and error rules: a stopped process cannot answer.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use super::config::CheckConfig;
use super::verdict::{CheckInput, Checker, Verdict, Violation, cap_ops};
use crate::history::{FaultPhase, History, Operation, Outcome};

pub struct AvailabilityChecker;

/// The label of operations invoked outside every fault window.
pub const NO_FAULT: &str = "none";

/// Outcomes of the operations invoked during one kind of fault.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowStats {
    pub windows: usize,
    pub total: usize,
    pub ok: usize,
    /// Refused by policy with a correct reason (e.g. budget exhausted): answered.
    pub refused: usize,
    /// Failed for lack of service (no quorum, node down, ...).
    pub unavailable: usize,
    /// Unknown outcome (timeout, connection lost mid-request).
    pub unknown: usize,
}

impl WindowStats {
    pub fn ok_share(&self) -> f64 {
        share(self.ok, self.total)
    }

    /// Ok plus correct refusals.
    pub fn answered_share(&self) -> f64 {
        share(self.ok + self.refused, self.total)
    }
}

fn share(part: usize, total: usize) -> f64 {
    if total == 0 {
        1.0
    } else {
        part as f64 / total as f64
    }
}

/// One applied fault window; an unclosed window lasts to the end of the history.
struct Window {
    kind: String,
    nodes: Vec<crate::NodeId>,
    start: u64,
    end: u64,
}

fn windows(history: &History) -> Vec<Window> {
    let mut open: BTreeMap<u64, Window> = BTreeMap::new();
    let mut closed = Vec::new();
    for fault in history.faults() {
        match fault.phase {
            FaultPhase::Start => {
                open.insert(
                    fault.window,
                    Window {
                        kind: fault.fault.clone(),
                        nodes: fault.nodes.clone(),
                        start: fault.time_ns,
                        end: u64::MAX,
                    },
                );
            }
            FaultPhase::Stop => {
                if let Some(mut window) = open.remove(&fault.window) {
                    window.end = fault.time_ns;
                    closed.push(window);
                }
            }
            FaultPhase::Skipped | FaultPhase::Failed => {}
        }
    }
    closed.extend(open.into_values());
    closed
}

/// Whether `op` went to a node that was paused while it ran: it cannot answer, so the
/// client's timeout is expected there and is not a hang.
fn hit_paused_node(op: &Operation, windows: &[Window]) -> bool {
    let end = op.end_ns().unwrap_or(u64::MAX);
    op.node().is_some_and(|node| {
        windows.iter().any(|w| {
            w.kind == PAUSE && w.nodes.contains(&node) && w.start <= end && op.start_ns() <= w.end
        })
    })
}

const PAUSE: &str = "pause";

/// Per fault kind (and [`NO_FAULT`]), the outcomes of operations invoked in its windows.
pub fn availability_by_fault(
    history: &History,
    operations: &[Operation],
    config: &CheckConfig,
) -> BTreeMap<String, WindowStats> {
    let windows = windows(history);
    let mut stats: BTreeMap<String, WindowStats> = BTreeMap::new();
    for window in &windows {
        stats.entry(window.kind.clone()).or_default().windows += 1;
    }
    for op in operations {
        let at = op.start_ns();
        let mut kinds: Vec<&str> = windows
            .iter()
            .filter(|w| w.start <= at && at <= w.end)
            .map(|w| w.kind.as_str())
            .collect();
        kinds.sort_unstable();
        kinds.dedup();
        if kinds.is_empty() {
            kinds.push(NO_FAULT);
        }
        let refused = op
            .error()
            .is_some_and(|e| config.policy_rejections.contains(&e.reason));
        for kind in kinds {
            let entry = stats.entry(kind.to_owned()).or_default();
            entry.total += 1;
            match op.outcome() {
                Outcome::Ok => entry.ok += 1,
                Outcome::Fail if refused => entry.refused += 1,
                Outcome::Fail => entry.unavailable += 1,
                Outcome::Info | Outcome::Pending => entry.unknown += 1,
            }
        }
    }
    stats
}

impl Checker for AvailabilityChecker {
    fn name(&self) -> &'static str {
        "availability"
    }

    fn check(&self, input: &CheckInput<'_>) -> Verdict {
        let config = input.config;
        let limit_ns = config
            .request_timeout
            .saturating_add(config.hang_grace)
            .as_nanos();
        let windows = windows(input.history);
        let (mut hangs, mut never, mut unclear, mut bare_500) = (vec![], vec![], vec![], vec![]);
        for op in &input.operations {
            if hit_paused_node(op, &windows) {
                continue;
            }
            match op.end_ns() {
                None => never.push(op.clone()),
                Some(end) if u128::from(end.saturating_sub(op.start_ns())) > limit_ns => {
                    hangs.push(op.clone())
                }
                Some(_) => {}
            }
            if !matches!(op.outcome(), Outcome::Fail | Outcome::Info) {
                continue;
            }
            let clear = op
                .error()
                .is_some_and(|e| config.clear_error_reasons.contains(&e.reason));
            if clear {
                continue;
            }
            if op.error().and_then(|e| e.status) == Some(500) {
                bare_500.push(op.clone());
            } else {
                unclear.push(op.clone());
            }
        }
        let mut violations = Vec::new();
        let mut report = |ops: Vec<Operation>, what: &str| {
            if !ops.is_empty() {
                violations.push(Violation::new(
                    format!("{} {what}", ops.len()),
                    cap_ops(ops),
                ));
            }
        };
        report(never, "operation(s) never completed (hang)");
        report(
            hangs,
            &format!(
                "operation(s) completed later than the {:.1}s timeout plus {:.1}s grace",
                config.request_timeout.as_secs_f64(),
                config.hang_grace.as_secs_f64()
            ),
        );
        report(unclear, "failure(s) without a clear reason");
        report(bare_500, "500 response(s) without a cause");
        let stats = availability_by_fault(input.history, &input.operations, config);
        let mut notes = Vec::new();
        for (kind, s) in &stats {
            notes.push(format!(
                "{kind}: {} window(s), {} ops, ok {:.1}%, answered {:.1}%, unavailable {}, unknown {}",
                s.windows,
                s.total,
                100.0 * s.ok_share(),
                100.0 * s.answered_share(),
                s.unavailable,
                s.unknown
            ));
            if let Some(min) = config.min_answered_share.get(kind) {
                if s.total > 0 && s.answered_share() < *min {
                    violations.push(Violation::new(
                        format!(
                            "{kind}: answered {:.1}% of requests, below the required {:.1}%",
                            100.0 * s.answered_share(),
                            100.0 * min
                        ),
                        Vec::new(),
                    ));
                }
            }
        }
        Verdict::from_findings(self.name(), violations, notes, input.operations.is_empty())
    }
}
