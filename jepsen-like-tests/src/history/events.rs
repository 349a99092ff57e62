//! The entries of a history: client events ([`Event`]: what was asked, [`Op`], and what came
//! back, [`OpResult`] / [`ErrorInfo`]), nemesis events ([`FaultEvent`]) and the [`History`]
//! that holds them. The recorder, the builder, the pairing and the JSON-lines I/O all build on
//! these types, so they live apart from the module root that re-exports them.

use serde::{Deserialize, Serialize};
use switchyard_core::{Priority, Purpose, QuotaScope};

use crate::NodeId;
use crate::state::OverrideStatus;

/// A logical client. After an `info` completion the client takes a fresh id (its old op may
/// still be in flight), so one process never has two operations open.
pub type ProcessId = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    Invoke,
    Ok,
    Fail,
    Info,
}

/// What a client asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "f", rename_all = "snake_case")]
pub enum Op {
    /// A business request through a replica; it reserves up to `max_tokens` of the caller's
    /// budget and settles the real count.
    Spend {
        caller: String,
        purpose: Purpose,
        priority: Priority,
        max_tokens: u64,
    },
    /// Reads the tokens the ledger has accounted to a scope.
    ReadSpend {
        scope: QuotaScope,
    },
    /// A spend report written to the ledger directly, idempotent by `(reporter, seq)`.
    ReportSpend {
        reporter: String,
        seq: u64,
        scope: QuotaScope,
        tokens: u64,
    },
    ProposeOverride {
        scope: QuotaScope,
        extra_tokens: u64,
        duration_ms: u64,
        requester: String,
    },
    ApproveOverride {
        id: u64,
        approver: String,
    },
    RevokeOverride {
        id: u64,
        principal: String,
    },
    /// Linearizable listing of the override registry.
    ListOverrides,
    RecordAffinity {
        prefix_key: u64,
        worker: String,
    },
}

impl Op {
    /// Short name, as in the JSON `f` field.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Spend { .. } => "spend",
            Op::ReadSpend { .. } => "read_spend",
            Op::ReportSpend { .. } => "report_spend",
            Op::ProposeOverride { .. } => "propose_override",
            Op::ApproveOverride { .. } => "approve_override",
            Op::RevokeOverride { .. } => "revoke_override",
            Op::ListOverrides => "list_overrides",
            Op::RecordAffinity { .. } => "record_affinity",
        }
    }

    /// Operations of the override registry (the linearizability checker's subject).
    pub fn is_override_op(&self) -> bool {
        matches!(
            self,
            Op::ProposeOverride { .. }
                | Op::ApproveOverride { .. }
                | Op::RevokeOverride { .. }
                | Op::ListOverrides
        )
    }
}

/// One override as a listing shows it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct OverrideView {
    pub id: u64,
    pub status: OverrideStatus,
    pub requester: String,
    pub approver: Option<String>,
}

/// What an `ok` completion returned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "r", rename_all = "snake_case")]
pub enum OpResult {
    /// The request was admitted and settled at `tokens`; `override_id` when the spend was
    /// drawn from an approved override.
    Spent {
        tokens: u64,
        override_id: Option<u64>,
    },
    SpendTotal {
        tokens: u64,
    },
    Reported,
    Proposed {
        id: u64,
    },
    Approved,
    Revoked,
    Overrides {
        records: Vec<OverrideView>,
    },
    Recorded,
}

/// Why an operation failed or is unknown: a machine-readable reason (the replica's error code,
/// or the client's own such as `timeout` / `connection_refused`) and the HTTP status if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// The replica's own words, kept for server errors (evidence for a bug report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl ErrorInfo {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            status: None,
            detail: None,
        }
    }

    pub fn http(status: u16, reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            status: Some(status),
            detail: None,
        }
    }

    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }
}

/// One client event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Position in the history (0-based, over all entries).
    pub index: u64,
    /// Nanoseconds since the run started (monotonic).
    pub time_ns: u64,
    pub process: ProcessId,
    /// The replica the client talked to.
    pub node: Option<NodeId>,
    #[serde(rename = "type")]
    pub kind: EventType,
    pub op: Op,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<OpResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorInfo>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultPhase {
    Start,
    Stop,
    /// The fault could not be applied here (e.g. partitions without network namespaces).
    Skipped,
    /// Applying or undoing the fault returned an error.
    Failed,
}

/// One nemesis event. `window` pairs a `start` with its `stop`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultEvent {
    pub index: u64,
    pub time_ns: u64,
    pub window: u64,
    pub phase: FaultPhase,
    /// The fault kind (`kill`, `pause`, `partition`, `loss`, `delay`, `clock`, `heal`).
    pub fault: String,
    pub nodes: Vec<NodeId>,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum Entry {
    Op(Event),
    Fault(FaultEvent),
}

impl Entry {
    pub fn index(&self) -> u64 {
        match self {
            Entry::Op(e) => e.index,
            Entry::Fault(f) => f.index,
        }
    }
}

/// A whole history, in recording order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct History {
    pub entries: Vec<Entry>,
}

impl History {
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Op(event) => Some(event),
            Entry::Fault(_) => None,
        })
    }

    pub fn faults(&self) -> impl Iterator<Item = &FaultEvent> {
        self.entries.iter().filter_map(|e| match e {
            Entry::Fault(fault) => Some(fault),
            Entry::Op(_) => None,
        })
    }
}
