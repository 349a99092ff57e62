//! What every checker shares: its input ([`CheckInput`]), the [`Checker`] trait and what it
//! answers ([`Verdict`], [`Violation`], [`Validity`]). The individual checkers build on this
//! file; the module root only lists them and re-exports.

use serde::{Deserialize, Serialize};
use std::fmt;

use super::config::CheckConfig;
use crate::history::{History, HistoryError, Operation};
use crate::state::FinalStates;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Validity {
    Valid,
    Invalid,
    /// The checker could not decide (missing data, search budget exhausted).
    Unknown,
}

/// One broken rule and the operations that show it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    pub message: String,
    pub ops: Vec<Operation>,
}

impl Violation {
    pub fn new(message: impl Into<String>, ops: Vec<Operation>) -> Self {
        Self {
            message: message.into(),
            ops,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub checker: String,
    pub validity: Validity,
    pub violations: Vec<Violation>,
    /// What was checked, figures, and why a part was not judged.
    pub notes: Vec<String>,
}

impl Verdict {
    /// Invalid when there are violations, otherwise valid (or unknown if `undecided`).
    pub fn from_findings(
        checker: &str,
        violations: Vec<Violation>,
        notes: Vec<String>,
        undecided: bool,
    ) -> Self {
        let validity = if !violations.is_empty() {
            Validity::Invalid
        } else if undecided {
            Validity::Unknown
        } else {
            Validity::Valid
        };
        Self {
            checker: checker.to_owned(),
            validity,
            violations,
            notes,
        }
    }

    pub fn is_valid(&self) -> bool {
        self.validity == Validity::Valid
    }
}

impl fmt::Display for Validity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Validity::Valid => "VALID",
            Validity::Invalid => "INVALID",
            Validity::Unknown => "UNKNOWN",
        })
    }
}

/// What the checkers read: the history paired into operations, and the final reads.
#[derive(Debug)]
pub struct CheckInput<'a> {
    pub history: &'a History,
    pub operations: Vec<Operation>,
    pub final_states: &'a FinalStates,
    pub config: &'a CheckConfig,
}

impl<'a> CheckInput<'a> {
    pub fn new(
        history: &'a History,
        final_states: &'a FinalStates,
        config: &'a CheckConfig,
    ) -> Result<Self, HistoryError> {
        Ok(Self {
            history,
            operations: history.operations()?,
            final_states,
            config,
        })
    }
}

pub trait Checker {
    fn name(&self) -> &'static str;
    fn check(&self, input: &CheckInput<'_>) -> Verdict;
}

/// At most this many operations are attached to one violation (the report stays readable).
pub const MAX_OPS_PER_VIOLATION: usize = 12;

pub(crate) fn cap_ops(mut ops: Vec<Operation>) -> Vec<Operation> {
    ops.truncate(MAX_OPS_PER_VIOLATION);
    ops
}
