//! Errors of the warmup manager, the degradation controller and their configuration.

use thiserror::Error;

/// A configuration value out of range; `field` is the dotted path inside `[warmup]` or
/// `[degradation]`, e.g. `resources[2].peak_windows[0]`.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("invalid config at `{field}`: {message}")]
pub struct ConfigError {
    pub field: String,
    pub message: String,
}

pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

/// Why one warmup did not happen or did not work. Returned by a [`crate::WarmupExecutor`].
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WarmupError {
    /// The front door (admission gates, budget) turned the warmup away.
    #[error("warmup refused at the front door: {0}")]
    Refused(String),
    /// Nothing can serve the target right now (no routable worker).
    #[error("no worker can take the warmup: {0}")]
    Unroutable(String),
    /// The worker answered with an error or the connection failed.
    #[error("warmup request failed: {0}")]
    Failed(String),
    #[error("warmup timed out")]
    TimedOut,
}

/// Errors of the [`crate::WarmupManager`] itself.
#[derive(Debug, Error)]
pub enum ManagerError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("warmup metrics cannot be registered: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("the warmup manager is not running: {0}")]
    Unavailable(String),
    #[error("no warmup resource named `{0}`")]
    UnknownResource(String),
}

/// A degradation action that could not be carried out. Must-succeed: one of these marks the
/// whole level failed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{0}")]
pub struct ActionError(pub String);

/// Errors of the [`crate::DegradationController`].
#[derive(Debug, Error)]
pub enum DegradationError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("degradation metrics cannot be registered: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("a {0} was requested without naming who asked for it")]
    Anonymous(&'static str),
    #[error("a level is forced: release it before running a drill")]
    Forced,
}
