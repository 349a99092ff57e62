//! The human-readable report of a run: operations, faults applied, availability per fault
//! kind, final-state agreement, and each checker's verdict with its offending operations.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::nemesis_driver::FaultOutcome;
use super::outcome::RunOutcome;
use crate::checker::Validity;
use crate::history::Outcome;

fn operations_section(out: &mut String, outcome: &RunOutcome) {
    let Ok(ops) = outcome.history.operations() else {
        let _ = writeln!(
            out,
            "operations: the history is malformed (see the history checker)"
        );
        return;
    };
    let mut by_kind: BTreeMap<&str, [usize; 4]> = BTreeMap::new();
    let mut totals = [0usize; 4];
    for op in &ops {
        let slot = match op.outcome() {
            Outcome::Ok => 0,
            Outcome::Fail => 1,
            Outcome::Info => 2,
            Outcome::Pending => 3,
        };
        by_kind.entry(op.op().name()).or_default()[slot] += 1;
        totals[slot] += 1;
    }
    let _ = writeln!(
        out,
        "operations: {} (ok {}, fail {}, info {}, never completed {})",
        ops.len(),
        totals[0],
        totals[1],
        totals[2],
        totals[3]
    );
    for (kind, [ok, fail, info, pending]) in by_kind {
        let _ = writeln!(
            out,
            "  {kind:<18} ok {ok:>6}  fail {fail:>6}  info {info:>5}  open {pending}"
        );
    }
}

fn faults_section(out: &mut String, outcome: &RunOutcome) {
    let _ = writeln!(
        out,
        "faults ({} scheduled windows + final heal):",
        outcome.schedule.faults.len()
    );
    for fault in &outcome.faults {
        let end = fault
            .ended_s
            .map(|end| format!("{end:.1}s"))
            .unwrap_or_default();
        let span = format!("{:>7.1}s–{end:<8}", fault.started_s);
        let result = match &fault.outcome {
            FaultOutcome::Applied => format!("applied to {:?}", fault.nodes),
            FaultOutcome::Skipped(reason) => format!("SKIPPED: {reason}"),
            FaultOutcome::Failed(error) => format!("FAILED: {error}"),
        };
        let label = if fault.window == 0 {
            "heal".to_owned()
        } else {
            format!("#{}", fault.window)
        };
        let _ = writeln!(
            out,
            "  {label:<5} {span} {:<48} {result}",
            fault.description
        );
        if let Some(error) = &fault.undo_error {
            let _ = writeln!(out, "        undo failed: {error}");
        }
    }
}

fn availability_section(out: &mut String, outcome: &RunOutcome) {
    let _ = writeln!(
        out,
        "availability by fault kind (answered = ok + correct refusals):"
    );
    for (kind, s) in &outcome.availability {
        let _ = writeln!(
            out,
            "  {kind:<10} windows {:>2}  ops {:>6}  ok {:>5.1}%  answered {:>5.1}%  unavailable {:>5}  unknown {:>4}",
            s.windows,
            s.total,
            100.0 * s.ok_share(),
            100.0 * s.answered_share(),
            s.unavailable,
            s.unknown
        );
    }
}

fn final_state_section(out: &mut String, outcome: &RunOutcome) {
    let finals = &outcome.final_states;
    let readable = finals.readable().count();
    let agreed = match (finals.converged_at_ns, finals.quiesced_at_ns) {
        (Some(at), Some(from)) => format!(
            "agreed {:.1}s after the clients stopped",
            at.saturating_sub(from) as f64 / 1e9
        ),
        _ => "did NOT agree".to_owned(),
    };
    let _ = writeln!(
        out,
        "final state: {readable} of {} nodes read, {agreed}",
        finals.nodes.len()
    );
}

fn verdicts_section(out: &mut String, outcome: &RunOutcome) {
    let _ = writeln!(out, "checkers:");
    for verdict in &outcome.verdicts {
        let count = match verdict.validity {
            Validity::Invalid => format!(" ({} violation(s))", verdict.violations.len()),
            _ => String::new(),
        };
        let _ = writeln!(out, "  {:<26} {}{count}", verdict.checker, verdict.validity);
        for note in &verdict.notes {
            let _ = writeln!(out, "      {note}");
        }
        for violation in &verdict.violations {
            let _ = writeln!(out, "      - {}", violation.message);
            for op in &violation.ops {
                let _ = writeln!(out, "          {op}");
            }
        }
    }
}

pub fn render(outcome: &RunOutcome) -> String {
    let config = &outcome.config;
    let nemeses: Vec<&str> = config.nemeses.iter().map(|k| k.as_str()).collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Switchyard chaos run: seed {}, {} nodes, {:.0}s, nemeses [{}], {} clients",
        config.seed,
        outcome.nodes.len(),
        config.duration.as_secs_f64(),
        nemeses.join(","),
        config.clients
    );
    operations_section(&mut out, outcome);
    faults_section(&mut out, outcome);
    availability_section(&mut out, outcome);
    final_state_section(&mut out, outcome);
    verdicts_section(&mut out, outcome);
    if let Some(dir) = &config.results_dir {
        let _ = writeln!(out, "results: {}", dir.display());
    }
    for (node, log) in &outcome.node_logs {
        let _ = writeln!(out, "  n{node} log: {}", log.display());
    }
    let _ = writeln!(
        out,
        "result: {}",
        if outcome.passed() { "PASS" } else { "FAIL" }
    );
    out
}
