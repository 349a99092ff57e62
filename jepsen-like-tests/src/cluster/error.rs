//! What can go wrong when the suite drives a cluster. A file of its own so every part of the
//! cluster module can report errors without depending on the module root.

use super::template::TemplateError;
use crate::NodeId;
use crate::nemesis::command::CommandError;
use crate::nemesis::netns::NetnsError;
use crate::nemesis::process::ProcessError;

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// This cluster cannot do that here (e.g. partitions without namespaces): the nemesis
    /// records the fault as skipped, with this reason.
    #[error("{what} is not supported here: {reason}")]
    Unsupported { what: &'static str, reason: String },
    #[error("node {0} is not part of the cluster")]
    UnknownNode(NodeId),
    #[error("node {node}: {source}")]
    Process { node: NodeId, source: ProcessError },
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error(transparent)]
    Template(#[from] TemplateError),
    #[error("node {node}: {message}")]
    Node { node: NodeId, message: String },
    #[error("worker {name}: {message}")]
    Worker { name: String, message: String },
    #[error("{context}: {source}")]
    Io {
        context: String,
        source: std::io::Error,
    },
}

impl ClusterError {
    pub fn unsupported(what: &'static str, reason: impl Into<String>) -> Self {
        Self::Unsupported {
            what,
            reason: reason.into(),
        }
    }

    pub fn is_unsupported(&self) -> bool {
        matches!(self, ClusterError::Unsupported { .. })
    }
}
