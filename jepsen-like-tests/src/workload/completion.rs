//! How an invocation ended. Its own file because the history builder records completions:
//! it names this type without going through the workload root, which itself depends on the
//! history.

use crate::history::events::{ErrorInfo, OpResult};

/// How an invocation ended, as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Completion {
    Ok(OpResult),
    /// Definitely had no effect (refused, connection refused before sending).
    Fail(ErrorInfo),
    /// May or may not have had an effect (timeout, connection lost mid-request).
    Info(ErrorInfo),
}
