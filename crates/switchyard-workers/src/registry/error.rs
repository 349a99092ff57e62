//! Why a registry operation failed; returned by the registry's front and by the registry
//! actor's replies alike.

use crate::config::HealthConfigError;
use crate::spec::SpecError;

#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("a worker named `{0}` is already registered")]
    AlreadyExists(String),
    #[error("no worker named `{0}`")]
    NotFound(String),
    #[error(transparent)]
    InvalidSpec(#[from] SpecError),
    #[error(transparent)]
    InvalidConfig(#[from] HealthConfigError),
    #[error("worker metrics cannot be registered: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("worker registry is not running: {0}")]
    Unavailable(String),
}
