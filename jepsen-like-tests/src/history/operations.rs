//! Invocations paired with their completions: the unit every checker reasons about.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

use super::events::{ErrorInfo, Event, EventType, History, Op, OpResult, ProcessId};
use super::io::HistoryError;
use crate::NodeId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Fail,
    /// The client does not know whether the operation took effect.
    Info,
    /// No completion was recorded (the run ended or the client hung).
    Pending,
}

impl Outcome {
    /// The operation may have taken effect.
    pub fn maybe_happened(self) -> bool {
        !matches!(self, Outcome::Fail)
    }

    /// The effect is uncertain (`info` or never completed).
    pub fn is_indeterminate(self) -> bool {
        matches!(self, Outcome::Info | Outcome::Pending)
    }
}

/// One client operation: its invocation and, if recorded, its completion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operation {
    pub invoke: Event,
    pub completion: Option<Event>,
}

impl Operation {
    pub fn outcome(&self) -> Outcome {
        match self.completion.as_ref().map(|c| c.kind) {
            Some(EventType::Ok) => Outcome::Ok,
            Some(EventType::Fail) => Outcome::Fail,
            Some(EventType::Info) | Some(EventType::Invoke) => Outcome::Info,
            None => Outcome::Pending,
        }
    }

    pub fn op(&self) -> &Op {
        &self.invoke.op
    }

    /// The invocation's index in the history: the operation's name in reports.
    pub fn id(&self) -> u64 {
        self.invoke.index
    }

    pub fn process(&self) -> ProcessId {
        self.invoke.process
    }

    pub fn node(&self) -> Option<NodeId> {
        self.invoke.node
    }

    pub fn start_ns(&self) -> u64 {
        self.invoke.time_ns
    }

    pub fn end_ns(&self) -> Option<u64> {
        self.completion.as_ref().map(|c| c.time_ns)
    }

    /// Completion time for `ok` operations; `u64::MAX` (never known to be over) otherwise.
    pub fn ok_end_or_max(&self) -> u64 {
        match self.outcome() {
            Outcome::Ok => self.end_ns().unwrap_or(u64::MAX),
            _ => u64::MAX,
        }
    }

    pub fn result(&self) -> Option<&OpResult> {
        self.completion.as_ref().and_then(|c| c.result.as_ref())
    }

    pub fn error(&self) -> Option<&ErrorInfo> {
        self.completion.as_ref().and_then(|c| c.error.as_ref())
    }
}

fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{} p{}", self.id(), self.process())?;
        if let Some(node) = self.node() {
            write!(f, " n{node}")?;
        }
        write!(f, " {:?}", self.op())?;
        match self.outcome() {
            Outcome::Ok => write!(f, " → ok")?,
            Outcome::Fail => write!(f, " → fail")?,
            Outcome::Info => write!(f, " → info")?,
            Outcome::Pending => write!(f, " → (no completion)")?,
        }
        if let Some(result) = self.result() {
            write!(f, " {result:?}")?;
        }
        if let Some(error) = self.error() {
            match error.status {
                Some(status) => write!(f, " [{status} {}]", error.reason)?,
                None => write!(f, " [{}]", error.reason)?,
            }
            if let Some(detail) = &error.detail {
                write!(f, " ({detail})")?;
            }
        }
        match self.end_ns() {
            Some(end) => write!(f, " @{:.3}s–{:.3}s", seconds(self.start_ns()), seconds(end)),
            None => write!(f, " @{:.3}s–", seconds(self.start_ns())),
        }
    }
}

// Pairing lives here rather than next to `History` so the entry types do not depend on the
// operations built from them.
impl History {
    /// Pairs every invocation with its completion.
    pub fn operations(&self) -> Result<Vec<Operation>, HistoryError> {
        pair(self.events())
    }
}

/// Pairs invocations with completions by process; an invocation left open at the end of the
/// history becomes a `Pending` operation.
pub(crate) fn pair<'a>(
    events: impl Iterator<Item = &'a Event>,
) -> Result<Vec<Operation>, HistoryError> {
    let mut operations: Vec<Operation> = Vec::new();
    let mut open: HashMap<ProcessId, usize> = HashMap::new();
    for event in events {
        if event.kind == EventType::Invoke {
            if let Some(&previous) = open.get(&event.process) {
                return Err(HistoryError::Malformed(format!(
                    "process {} invoked #{} while #{} was still open",
                    event.process, event.index, operations[previous].invoke.index
                )));
            }
            open.insert(event.process, operations.len());
            operations.push(Operation {
                invoke: event.clone(),
                completion: None,
            });
            continue;
        }
        let Some(position) = open.remove(&event.process) else {
            return Err(HistoryError::Malformed(format!(
                "completion #{} of process {} has no open invocation",
                event.index, event.process
            )));
        };
        let operation = &mut operations[position];
        if operation.invoke.op != event.op {
            return Err(HistoryError::Malformed(format!(
                "completion #{} does not repeat the op of invocation #{}",
                event.index, operation.invoke.index
            )));
        }
        operation.completion = Some(event.clone());
    }
    Ok(operations)
}
