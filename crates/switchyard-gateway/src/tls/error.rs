//! What can go wrong building TLS material, and the one crypto provider every TLS config
//! uses; apart from `mod.rs` so the material and the reloader can use both without a cycle.

use rustls::crypto::CryptoProvider;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{field} `{path}`: {message}")]
    File {
        field: String,
        path: String,
        message: String,
    },
    #[error("{field}: {message}")]
    Config { field: String, message: String },
}

impl TlsError {
    pub(super) fn config(field: &str, message: impl std::fmt::Display) -> Self {
        Self::Config {
            field: field.into(),
            message: message.to_string(),
        }
    }
}

/// The one crypto provider: ring (no aws-lc build).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}
