//! Errors raised while building a routing policy.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum RouterError {
    #[error("unknown routing policy `{name}`; valid policies are: {}", .valid.join(", "))]
    UnknownPolicy {
        name: String,
        valid: &'static [&'static str],
    },
    /// `field` is the dotted path inside the routing config, e.g. `hotspot.top_k`.
    #[error("invalid routing config: `{field}` {requirement}, got {value}")]
    InvalidConfig {
        field: &'static str,
        requirement: &'static str,
        value: String,
    },
}

pub(crate) fn invalid(
    field: &'static str,
    requirement: &'static str,
    value: impl ToString,
) -> RouterError {
    RouterError::InvalidConfig {
        field,
        requirement,
        value: value.to_string(),
    }
}
