//! Limits that keep untrusted clients from exhausting the gateway or its billing: what a
//! request may ask for (`[limits]`, live) and how the client listener treats slow or
//! numerous connections (`[listener]`, restart-only).

use serde::{Deserialize, Serialize};
use std::time::Duration;
use switchyard_core::Secret;

use super::error::{ConfigError, check_admin_key_strength};

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest `max_tokens` / `max_completion_tokens` a request may ask for; more is a 400.
    /// Keep it at or below the smallest context length of the models served.
    pub max_output_tokens: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_output_tokens: 131_072,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ListenerConfig {
    /// A connection must deliver a complete request head within this long, or it is closed.
    /// The same timer runs while a keep-alive connection waits for its next request, so it
    /// is also the idle keep-alive timeout.
    pub header_read_timeout_ms: u64,
    /// A request body must arrive whole within this long (from the end of its head); past it
    /// the request is refused with 408.
    pub body_read_timeout_ms: u64,
    /// Client connections served at once; further ones wait in the kernel's accept queue.
    pub max_connections: usize,
    /// Request bodies being read and held before admission, summed over all requests; a
    /// request that would push the sum past it is refused with 503 and `Retry-After`.
    pub max_pending_body_bytes: u64,
    /// When set, `GET /metrics` needs `Authorization: Bearer <token>` (it names tenants).
    /// At least 16 characters. Never serialised out.
    pub metrics_token: Secret,
    /// `ip:port` of a separate plain-HTTP listener serving only `/metrics` (keep it on a
    /// private interface); the client listener then answers 404 there. Empty: `/metrics` on
    /// the client listener.
    pub metrics_addr: String,
    /// PEM certificate chain and private key: when both are set the listener speaks only
    /// TLS (rustls). Empty: plain HTTP.
    pub tls_cert_path: String,
    pub tls_key_path: String,
}

impl Default for ListenerConfig {
    fn default() -> Self {
        Self {
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            max_connections: 4096,
            max_pending_body_bytes: 256 * 1024 * 1024,
            metrics_token: Secret::default(),
            metrics_addr: String::new(),
            tls_cert_path: String::new(),
            tls_key_path: String::new(),
        }
    }
}

impl ListenerConfig {
    pub fn header_read_timeout(&self) -> Duration {
        Duration::from_millis(self.header_read_timeout_ms)
    }

    pub fn tls_enabled(&self) -> bool {
        !self.tls_cert_path.is_empty()
    }

    pub fn body_read_timeout(&self) -> Duration {
        Duration::from_millis(self.body_read_timeout_ms)
    }
}

pub(super) fn validate(
    limits: &LimitsConfig,
    listener: &ListenerConfig,
) -> Result<(), ConfigError> {
    let positive = [
        ("limits.max_output_tokens", limits.max_output_tokens),
        (
            "listener.header_read_timeout_ms",
            listener.header_read_timeout_ms,
        ),
        (
            "listener.body_read_timeout_ms",
            listener.body_read_timeout_ms,
        ),
        ("listener.max_connections", listener.max_connections as u64),
        (
            "listener.max_pending_body_bytes",
            listener.max_pending_body_bytes,
        ),
    ];
    for (path, value) in positive {
        if value == 0 {
            return Err(ConfigError::invalid(path, "must be greater than 0"));
        }
    }
    if listener.tls_cert_path.is_empty() != listener.tls_key_path.is_empty() {
        return Err(ConfigError::invalid(
            "listener.tls_key_path",
            "set both tls_cert_path and tls_key_path, or neither",
        ));
    }
    if !listener.metrics_addr.is_empty()
        && listener
            .metrics_addr
            .parse::<std::net::SocketAddr>()
            .is_err()
    {
        return Err(ConfigError::invalid(
            "listener.metrics_addr",
            format!("`{}` is not an ip:port address", listener.metrics_addr),
        ));
    }
    if !listener.metrics_token.is_empty() {
        check_admin_key_strength("listener.metrics_token", listener.metrics_token.expose())?;
    }
    Ok(())
}
