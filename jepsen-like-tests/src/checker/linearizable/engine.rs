//! The search proper: the [`Model`] a history is checked against, the limits, and the
//! answer. A file of its own so models (such as the override registry) depend on it rather
//! than on the module root that re-exports them.

use std::collections::HashSet;
use std::fmt::Debug;
use std::hash::Hash;

use super::bits::Bits;
use crate::history::{Operation, Outcome};

/// A sequential specification.
pub trait Model {
    type State: Clone + Eq + Hash + Debug;

    fn initial(&self) -> Self::State;

    /// The states `op` can lead to from `state` given what it returned. For an operation
    /// whose outcome is unknown, the states if it took effect. Empty: it cannot go here.
    fn step(&self, state: &Self::State, op: &Operation) -> Vec<Self::State>;
}

#[derive(Clone, Copy, Debug)]
pub struct SearchLimits {
    /// Operations searched at most (the first ones by invocation).
    pub max_ops: usize,
    /// Distinct `(linearized set, state)` pairs visited before giving up.
    pub max_states: usize,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Linearization {
    /// A valid order (operation ids, i.e. invocation indices).
    Linearizable {
        order: Vec<u64>,
    },
    /// No order exists. `linearized`: the longest prefix found; `stuck`: the `ok` operations
    /// that could not be placed after it.
    NotLinearizable {
        linearized: Vec<u64>,
        stuck: Vec<u64>,
    },
    Unknown {
        reason: String,
    },
}

/// Keeps the first `max_ops` operations by invocation. Operations still open at the cut-off
/// become indeterminate (their results may depend on operations left out), which only
/// weakens the check: no false alarms from truncation.
pub fn truncate(ops: &[Operation], max_ops: usize) -> Vec<Operation> {
    let mut sorted: Vec<Operation> = ops.to_vec();
    sorted.sort_by_key(|op| (op.start_ns(), op.id()));
    if sorted.len() <= max_ops {
        return sorted;
    }
    sorted.truncate(max_ops);
    let cutoff = sorted.last().map_or(0, Operation::start_ns);
    for op in &mut sorted {
        if op.end_ns().is_none_or(|end| end > cutoff) {
            op.completion = None;
        }
    }
    sorted
}

struct Frame<S> {
    done: Bits,
    choices: Vec<(usize, S)>,
    next: usize,
    chosen: Option<usize>,
}

struct Search<'a, M: Model> {
    model: &'a M,
    ops: &'a [Operation],
    calls: Vec<u64>,
    returns: Vec<u64>,
    required: usize,
}

impl<M: Model> Search<'_, M> {
    /// The ops that may go next and the states they lead to; `None` when all `ok` ops are done.
    fn expand(&self, state: &M::State, done: &Bits) -> Option<Vec<(usize, M::State)>> {
        let required_done = (0..self.ops.len())
            .filter(|&i| done.get(i) && self.returns[i] != u64::MAX)
            .count();
        if required_done == self.required {
            return None;
        }
        let min_return = (0..self.ops.len())
            .filter(|&i| !done.get(i))
            .map(|i| self.returns[i])
            .min()
            .unwrap_or(u64::MAX);
        let mut choices = Vec::new();
        for i in (0..self.ops.len()).filter(|&i| !done.get(i) && self.calls[i] <= min_return) {
            for next in self.model.step(state, &self.ops[i]) {
                choices.push((i, next));
            }
        }
        Some(choices)
    }

    fn stuck(&self, done: &Bits) -> Vec<u64> {
        let min_return = (0..self.ops.len())
            .filter(|&i| !done.get(i))
            .map(|i| self.returns[i])
            .min()
            .unwrap_or(u64::MAX);
        (0..self.ops.len())
            .filter(|&i| !done.get(i) && self.returns[i] != u64::MAX)
            .filter(|&i| self.calls[i] <= min_return)
            .map(|i| self.ops[i].id())
            .collect()
    }

    fn path(&self, stack: &[Frame<M::State>]) -> Vec<u64> {
        stack
            .iter()
            .filter_map(|f| f.chosen)
            .map(|i| self.ops[i].id())
            .collect()
    }
}

/// Searches for a linearization of `ops` (already without `fail` operations).
pub fn search<M: Model>(model: &M, ops: &[Operation], limits: &SearchLimits) -> Linearization {
    let search = Search {
        model,
        ops,
        calls: ops.iter().map(Operation::start_ns).collect(),
        returns: ops.iter().map(Operation::ok_end_or_max).collect(),
        required: ops.iter().filter(|op| op.outcome() == Outcome::Ok).count(),
    };
    let empty = Bits::new(ops.len());
    let initial = model.initial();
    let Some(choices) = search.expand(&initial, &empty) else {
        return Linearization::Linearizable { order: Vec::new() };
    };
    let mut visited: HashSet<(Bits, M::State)> = HashSet::new();
    let mut stack = vec![Frame {
        done: empty,
        choices,
        next: 0,
        chosen: None,
    }];
    let (mut deepest_count, mut deepest_path, mut deepest_done) =
        (0, Vec::new(), Bits::new(ops.len()));
    while let Some(frame) = stack.last_mut() {
        if frame.next >= frame.choices.len() {
            stack.pop();
            continue;
        }
        let (op, state) = frame.choices[frame.next].clone();
        frame.next += 1;
        let done = frame.done.with(op);
        if !visited.insert((done.clone(), state.clone())) {
            continue;
        }
        if visited.len() > limits.max_states {
            return Linearization::Unknown {
                reason: format!(
                    "search gave up after {} states ({} operations)",
                    limits.max_states,
                    ops.len()
                ),
            };
        }
        match search.expand(&state, &done) {
            None => {
                let mut order = search.path(&stack);
                order.push(ops[op].id());
                return Linearization::Linearizable { order };
            }
            Some(choices) => {
                let count = done.count();
                stack.push(Frame {
                    done,
                    choices,
                    next: 0,
                    chosen: Some(op),
                });
                if count > deepest_count {
                    deepest_count = count;
                    deepest_path = search.path(&stack);
                    deepest_done = stack.last().map(|f| f.done.clone()).unwrap_or_default();
                }
            }
        }
    }
    Linearization::NotLinearizable {
        stuck: search.stuck(&deepest_done),
        linearized: deepest_path,
    }
}
