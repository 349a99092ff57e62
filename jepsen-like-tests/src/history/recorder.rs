//! The concurrent recorder clients and the nemesis write to during a run. Timestamps come from
//! tokio's clock (so tests with paused time produce exact histories) and are taken under the
//! same lock that assigns the index, so index order is time order.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::time::Instant;

use super::events::{
    Entry, ErrorInfo, Event, EventType, FaultEvent, FaultPhase, History, Op, OpResult, ProcessId,
};
use super::io::{HistoryError, HistoryWriter};
use crate::NodeId;

#[derive(Debug)]
struct Inner {
    history: History,
    writer: Option<HistoryWriter>,
    /// The first write failure; later entries stay in memory only.
    write_error: Option<String>,
}

/// Hands out process ids and records events. Clones share the same history.
#[derive(Clone, Debug)]
pub struct Recorder {
    inner: Arc<Mutex<Inner>>,
    start: Instant,
    next_process: Arc<AtomicU64>,
}

/// An open invocation; complete it exactly once.
#[derive(Debug)]
#[must_use = "an invocation must be completed"]
pub struct InvokeTicket {
    pub process: ProcessId,
    pub node: Option<NodeId>,
    pub op: Op,
    pub invoked_at_ns: u64,
}

impl Recorder {
    /// `writer`: where every entry is appended as it is recorded (none: memory only).
    pub fn new(writer: Option<HistoryWriter>) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                history: History::default(),
                writer,
                write_error: None,
            })),
            start: Instant::now(),
            next_process: Arc::new(AtomicU64::new(0)),
        }
    }

    pub fn started_at(&self) -> Instant {
        self.start
    }

    pub fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub fn new_process(&self) -> ProcessId {
        self.next_process.fetch_add(1, Ordering::Relaxed)
    }

    pub fn invoke(&self, process: ProcessId, node: Option<NodeId>, op: Op) -> InvokeTicket {
        let invoked_at_ns = self.push(|index, time_ns| {
            Entry::Op(Event {
                index,
                time_ns,
                process,
                node,
                kind: EventType::Invoke,
                op: op.clone(),
                result: None,
                error: None,
            })
        });
        InvokeTicket {
            process,
            node,
            op,
            invoked_at_ns,
        }
    }

    /// Records the completion of `ticket`. `kind` must not be `Invoke`.
    pub fn complete(
        &self,
        ticket: InvokeTicket,
        kind: EventType,
        result: Option<OpResult>,
        error: Option<ErrorInfo>,
    ) {
        self.push(|index, time_ns| {
            Entry::Op(Event {
                index,
                time_ns,
                process: ticket.process,
                node: ticket.node,
                kind,
                op: ticket.op,
                result,
                error,
            })
        });
    }

    pub fn fault(
        &self,
        window: u64,
        phase: FaultPhase,
        fault: &str,
        nodes: Vec<NodeId>,
        detail: String,
    ) {
        self.push(|index, time_ns| {
            Entry::Fault(FaultEvent {
                index,
                time_ns,
                window,
                phase,
                fault: fault.to_owned(),
                nodes,
                detail,
            })
        });
    }

    fn push(&self, make: impl FnOnce(u64, u64) -> Entry) -> u64 {
        let mut inner = self.inner.lock();
        let index = inner.history.entries.len() as u64;
        let time_ns = self.elapsed_ns();
        let entry = make(index, time_ns);
        if inner.write_error.is_none() {
            let written = inner.writer.as_mut().map(|w| w.append(&entry));
            if let Some(Err(e)) = written {
                tracing::error!(error = %e, "history file write failed; keeping the history in memory");
                inner.write_error = Some(e.to_string());
            }
        }
        inner.history.entries.push(entry);
        time_ns
    }

    /// A copy of everything recorded so far.
    pub fn snapshot(&self) -> History {
        self.inner.lock().history.clone()
    }

    /// The history, or the first error writing it to disk.
    pub fn finish(&self) -> Result<History, HistoryError> {
        let inner = self.inner.lock();
        match &inner.write_error {
            Some(e) => Err(HistoryError::Incomplete(e.clone())),
            None => Ok(inner.history.clone()),
        }
    }
}
