//! The search itself, on a plain register (write = `report_spend` of `tokens`, read =
//! `read_spend` answering `spend_total`).

use super::*;
use crate::history::{ErrorInfo, HistoryBuilder, Op, OpResult, Operation, Outcome};
use switchyard_core::QuotaScope;

struct Register;

impl Model for Register {
    type State = u64;

    fn initial(&self) -> u64 {
        0
    }

    fn step(&self, state: &u64, op: &Operation) -> Vec<u64> {
        match (op.op(), op.result()) {
            (Op::ReportSpend { tokens, .. }, _) => vec![*tokens],
            (Op::ReadSpend { .. }, Some(OpResult::SpendTotal { tokens })) if tokens == state => {
                vec![*state]
            }
            _ => Vec::new(),
        }
    }
}

fn write(v: u64) -> Op {
    Op::ReportSpend {
        reporter: "r".into(),
        seq: v,
        scope: QuotaScope::caller("a"),
        tokens: v,
    }
}

fn read() -> Op {
    Op::ReadSpend {
        scope: QuotaScope::caller("a"),
    }
}

fn total(v: u64) -> OpResult {
    OpResult::SpendTotal { tokens: v }
}

const LIMITS: SearchLimits = SearchLimits {
    max_ops: 100,
    max_states: 100_000,
};

fn run(b: &HistoryBuilder) -> Linearization {
    let ops = b.build().operations().unwrap();
    let ops: Vec<Operation> = ops
        .into_iter()
        .filter(|o| o.outcome() != Outcome::Fail)
        .collect();
    search(&Register, &ops, &LIMITS)
}

#[test]
fn sequential_write_then_read_is_linearizable() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 10, write(1), OpResult::Reported)
        .ok(2, 1, 20, 30, read(), total(1));
    assert!(matches!(run(&b), Linearization::Linearizable { order } if order.len() == 2));
}

#[test]
fn stale_read_after_acknowledged_write_is_caught() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 10, write(1), OpResult::Reported)
        .ok(2, 2, 20, 30, read(), total(0));
    let Linearization::NotLinearizable { linearized, stuck } = run(&b) else {
        panic!("a stale read must not linearize");
    };
    assert_eq!(linearized, vec![0], "the write is the longest prefix");
    assert_eq!(stuck, vec![2], "the read (invocation index 2) is stuck");
}

#[test]
fn concurrent_read_may_see_either_value() {
    for seen in [0, 1] {
        let mut b = HistoryBuilder::new();
        b.ok(1, 1, 0, 30, write(1), OpResult::Reported)
            .ok(2, 2, 10, 20, read(), total(seen));
        assert!(
            matches!(run(&b), Linearization::Linearizable { .. }),
            "saw {seen}"
        );
    }
}

#[test]
fn unknown_write_may_or_may_not_take_effect_but_cannot_invent_values() {
    for (seen, ok) in [(2, true), (0, true), (3, false)] {
        let mut b = HistoryBuilder::new();
        b.info(1, 1, 0, 5, write(2), ErrorInfo::new("timeout")).ok(
            2,
            2,
            50,
            60,
            read(),
            total(seen),
        );
        let linearizable = matches!(run(&b), Linearization::Linearizable { .. });
        assert_eq!(linearizable, ok, "read of {seen}");
    }
}

#[test]
fn a_write_cannot_be_seen_before_it_was_invoked() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 10, read(), total(7))
        .ok(2, 2, 20, 30, write(7), OpResult::Reported);
    assert!(matches!(run(&b), Linearization::NotLinearizable { .. }));
}

#[test]
fn state_budget_turns_into_unknown() {
    let mut b = HistoryBuilder::new();
    for p in 0..12 {
        b.ok(p, 1, 0, 100, write(p), OpResult::Reported);
    }
    b.ok(99, 1, 200, 210, read(), total(1000));
    let ops = b.build().operations().unwrap();
    let limits = SearchLimits {
        max_ops: 100,
        max_states: 50,
    };
    assert!(matches!(
        search(&Register, &ops, &limits),
        Linearization::Unknown { .. }
    ));
}

#[test]
fn truncation_keeps_the_first_ops_and_releases_open_ones() {
    let mut b = HistoryBuilder::new();
    b.ok(1, 1, 0, 4, write(1), OpResult::Reported)
        .ok(2, 1, 5, 50, read(), total(9))
        .ok(3, 1, 20, 30, write(9), OpResult::Reported);
    let ops = b.build().operations().unwrap();
    let kept = truncate(&ops, 2);
    assert_eq!(kept.len(), 2);
    assert_eq!(
        kept[0].outcome(),
        Outcome::Ok,
        "completed before the cut-off"
    );
    assert_eq!(kept[1].outcome(), Outcome::Pending, "open at the cut-off");
    assert!(matches!(
        search(&Register, &kept, &LIMITS),
        Linearization::Linearizable { .. }
    ));
}
