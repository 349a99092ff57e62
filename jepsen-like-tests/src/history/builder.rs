//! Hand-built histories for checker tests and examples: operations are given as intervals in
//! milliseconds and may be added in any order; `build` sorts them into a consistent history.

use super::events::{
    Entry, ErrorInfo, Event, EventType, FaultEvent, FaultPhase, History, Op, OpResult, ProcessId,
};
use crate::NodeId;
use crate::workload::completion::Completion;

#[derive(Clone, Debug, Default)]
pub struct HistoryBuilder {
    /// (time, insertion order, entry); indices are assigned by `build`.
    pending: Vec<(u64, usize, Entry)>,
}

const NS_PER_MS: u64 = 1_000_000;

impl HistoryBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(&mut self, time_ns: u64, entry: Entry) {
        let order = self.pending.len();
        self.pending.push((time_ns, order, entry));
    }

    fn event(process: ProcessId, node: NodeId, time_ns: u64, kind: EventType, op: Op) -> Event {
        Event {
            index: 0,
            time_ns,
            process,
            node: Some(node),
            kind,
            op,
            result: None,
            error: None,
        }
    }

    /// An operation invoked at `start_ms` and completed at `end_ms` by `process` via `node`.
    pub fn op(
        &mut self,
        process: ProcessId,
        node: NodeId,
        start_ms: u64,
        end_ms: u64,
        op: Op,
        completion: Completion,
    ) -> &mut Self {
        let (start, end) = (start_ms * NS_PER_MS, end_ms.max(start_ms) * NS_PER_MS);
        self.push(
            start,
            Entry::Op(Self::event(
                process,
                node,
                start,
                EventType::Invoke,
                op.clone(),
            )),
        );
        let (kind, result, error) = match completion {
            Completion::Ok(result) => (EventType::Ok, Some(result), None),
            Completion::Fail(error) => (EventType::Fail, None, Some(error)),
            Completion::Info(error) => (EventType::Info, None, Some(error)),
        };
        let mut done = Self::event(process, node, end, kind, op);
        done.result = result;
        done.error = error;
        self.push(end, Entry::Op(done));
        self
    }

    pub fn ok(
        &mut self,
        process: ProcessId,
        node: NodeId,
        start_ms: u64,
        end_ms: u64,
        op: Op,
        result: OpResult,
    ) -> &mut Self {
        self.op(process, node, start_ms, end_ms, op, Completion::Ok(result))
    }

    pub fn fail(
        &mut self,
        process: ProcessId,
        node: NodeId,
        start_ms: u64,
        end_ms: u64,
        op: Op,
        error: ErrorInfo,
    ) -> &mut Self {
        self.op(process, node, start_ms, end_ms, op, Completion::Fail(error))
    }

    pub fn info(
        &mut self,
        process: ProcessId,
        node: NodeId,
        start_ms: u64,
        end_ms: u64,
        op: Op,
        error: ErrorInfo,
    ) -> &mut Self {
        self.op(process, node, start_ms, end_ms, op, Completion::Info(error))
    }

    /// An invocation that never completes.
    pub fn pending(
        &mut self,
        process: ProcessId,
        node: NodeId,
        start_ms: u64,
        op: Op,
    ) -> &mut Self {
        let start = start_ms * NS_PER_MS;
        self.push(
            start,
            Entry::Op(Self::event(process, node, start, EventType::Invoke, op)),
        );
        self
    }

    /// A fault window `[start_ms, end_ms]` of kind `fault` on `nodes`.
    pub fn fault_window(
        &mut self,
        window: u64,
        fault: &str,
        nodes: Vec<NodeId>,
        start_ms: u64,
        end_ms: u64,
    ) -> &mut Self {
        for (phase, at_ms) in [(FaultPhase::Start, start_ms), (FaultPhase::Stop, end_ms)] {
            let time_ns = at_ms * NS_PER_MS;
            self.push(
                time_ns,
                Entry::Fault(FaultEvent {
                    index: 0,
                    time_ns,
                    window,
                    phase,
                    fault: fault.to_owned(),
                    nodes: nodes.clone(),
                    detail: String::new(),
                }),
            );
        }
        self
    }

    /// The history in time order (ties keep insertion order), indices assigned.
    pub fn build(&self) -> History {
        let mut pending = self.pending.clone();
        pending.sort_by_key(|(time, order, _)| (*time, *order));
        let entries = pending
            .into_iter()
            .enumerate()
            .map(|(index, (_, _, mut entry))| {
                match &mut entry {
                    Entry::Op(event) => event.index = index as u64,
                    Entry::Fault(fault) => fault.index = index as u64,
                }
                entry
            })
            .collect();
        History { entries }
    }
}
