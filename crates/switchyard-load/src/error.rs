use std::path::PathBuf;

/// Everything that can stop a load run before or after it produced a report.
///
/// Per-request failures (HTTP statuses, timeouts, broken streams) are never errors here: they are
/// counted in the [`crate::LoadReport`].
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("invalid target URL {target:?}: {reason}")]
    InvalidTarget { target: String, reason: String },
    #[error("invalid header {header:?}: {reason}")]
    InvalidHeader { header: String, reason: String },
    #[error("invalid load configuration: {0}")]
    InvalidConfig(String),
    #[error("could not discover a model from {uri}: {reason}")]
    ModelDiscovery { uri: String, reason: String },
    #[error("could not serialize the report: {0}")]
    Serialize(#[from] serde_json::Error),
    #[error("trace file {path}: {source}")]
    Trace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("could not write the report to {path}: {source}")]
    WriteReport {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}
