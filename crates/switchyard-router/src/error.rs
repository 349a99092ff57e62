//! Errors raised while building a routing policy.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum RouterError {
    #[error("unknown routing policy `{name}`; valid policies are: {}", .valid.join(", "))]
    UnknownPolicy {
        name: String,
        valid: &'static [&'static str],
    },
    #[error("invalid cache_aware config: `{field}` {requirement}, got {value}")]
    InvalidConfig {
        field: &'static str,
        requirement: &'static str,
        value: String,
    },
}
