//! The recorded history of a run, Jepsen-style: every client operation is an `invoke` followed
//! by exactly one completion (`ok`, `fail` = definitely had no effect, `info` = outcome
//! unknown), and every nemesis action is a fault event. One JSON object per line on disk.

mod builder;
pub(crate) mod events;
mod io;
mod operations;
mod recorder;

pub use builder::HistoryBuilder;
pub use events::{
    Entry, ErrorInfo, Event, EventType, FaultEvent, FaultPhase, History, Op, OpResult,
    OverrideView, ProcessId,
};
pub use io::{HistoryError, HistoryWriter, read_history, write_history};
pub use operations::{Operation, Outcome};
pub use recorder::{InvokeTicket, Recorder};
