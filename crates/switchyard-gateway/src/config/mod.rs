//! The gateway's configuration: TOML, every field defaulted, unknown keys rejected, every
//! invalid value reported with its field path. `config/switchyard.toml` documents it all.

mod error;
mod limits;
mod load;
mod validate;
mod warmup;

pub use crate::cluster::{ClusterConfig, ClusterMember};
use serde::{Deserialize, Serialize};
use std::time::Duration;
pub use switchyard_admission::AdmissionConfig;
use switchyard_core::Secret;
pub use switchyard_router::RoutingConfig;
use switchyard_workers::{HttpClientConfig, WorkerSpec};

pub use switchyard_workers::HealthConfig;
pub use switchyard_workers::discovery::DiscoveryConfig;

pub use crate::proxy::deadline::FirstByteConfig;
pub use crate::proxy::retry_budget::RetryConfig;

pub use error::ConfigError;
pub(crate) use error::check_admin_key_strength;
pub use limits::{LimitsConfig, ListenerConfig};
pub use switchyard_warmup::{DegradationConfig, WarmupConfig};

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub upstream: UpstreamConfig,
    pub routing: RoutingConfig,
    pub retry: RetryConfig,
    /// Worker health checks, latency-aware overload marking, prober, breaker, drain.
    pub health: HealthConfig,
    pub prefilter: PrefilterConfig,
    pub admission: AdmissionConfig,
    pub cluster: ClusterConfig,
    pub admin: AdminConfig,
    pub workers: Vec<WorkerSpec>,
    /// Workers found by watching Kubernetes pods (off by default), besides `workers`.
    pub discovery: DiscoveryConfig,
    /// Warmup tiers, budget and ramp (`switchyard-warmup`).
    pub warmup: WarmupConfig,
    /// Graded degradation, model downgrade chains and the response cache.
    pub degradation: DegradationConfig,
    /// What a request may ask for (`max_tokens` cap).
    pub limits: LimitsConfig,
    /// Timeouts and caps of the client listener; the `/metrics` token.
    pub listener: ListenerConfig,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    pub host: String,
    pub port: u16,
    /// Largest accepted request body; bigger ones get 413.
    pub max_body_bytes: usize,
    /// How long a shutdown waits for in-flight responses to finish.
    pub shutdown_grace_ms: u64,
    /// After a stop signal, how long requests are still accepted while `/ready` already
    /// answers 503 (load balancers need a moment to stop sending).
    pub shutdown_accept_ms: u64,
    /// How long a departing Raft leader waits for the group to elect its successor.
    pub shutdown_handover_ms: u64,
    /// How often the config file is checked for changes (0 disables watching).
    pub config_watch_interval_ms: u64,
    /// How often TLS certificate, key and CA files are checked for changes and reloaded in
    /// place (0 disables reloading).
    pub tls_reload_interval_ms: u64,
    /// JSON-lines file that every config change (and refused attempt) is appended to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_log_path: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            host: "127.0.0.1".into(),
            port: 8080,
            max_body_bytes: 32 * 1024 * 1024,
            shutdown_grace_ms: 10_000,
            shutdown_accept_ms: 2_000,
            shutdown_handover_ms: 3_000,
            config_watch_interval_ms: 2_000,
            tls_reload_interval_ms: 10_000,
            audit_log_path: None,
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// TCP connect timeout to a worker; a failure is a 502.
    pub connect_timeout_ms: u64,
    /// Time from sending the request until the worker's response headers; past it, 504.
    /// Non-streaming workers send headers only when generation ends, so keep it generous.
    pub request_timeout_ms: u64,
    /// Idle keep-alive connections to workers are closed after this long.
    pub pool_idle_timeout_ms: u64,
    pub pool_max_idle_per_host: usize,
    /// Per-attempt deadline for the worker's first byte, derived from its recent latency.
    pub first_byte: FirstByteConfig,
    /// A stream with no chunk for this long ends with an error event.
    pub stream_idle_timeout_ms: u64,
    /// PEM CA bundle that `https://` workers' certificates are verified against (name and
    /// chain). Empty: only `http://` workers are accepted.
    pub tls_ca_path: String,
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        Self {
            connect_timeout_ms: 2_000,
            request_timeout_ms: 300_000,
            pool_idle_timeout_ms: 90_000,
            pool_max_idle_per_host: 256,
            first_byte: FirstByteConfig::default(),
            stream_idle_timeout_ms: 30_000,
            tls_ca_path: String::new(),
        }
    }
}

impl UpstreamConfig {
    pub fn client_config(&self) -> HttpClientConfig {
        HttpClientConfig {
            connect_timeout: Duration::from_millis(self.connect_timeout_ms),
            pool_idle_timeout: Duration::from_millis(self.pool_idle_timeout_ms),
            pool_max_idle_per_host: self.pool_max_idle_per_host,
            // Set by the gateway from `tls_ca_path` (read once, reloaded in place).
            tls: None,
        }
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }

    pub fn stream_idle_timeout(&self) -> Duration {
        Duration::from_millis(self.stream_idle_timeout_ms)
    }
}

/// What to do when every worker serving a model is filtered out (unhealthy, draining,
/// circuit open or latency-overloaded).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// Answer 503 with `Retry-After` rather than route into a known-bad worker.
    #[default]
    Reject,
    /// Route to the least-loaded of the filtered workers that is not draining or circuit-open.
    LeastLoaded,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PrefilterConfig {
    pub fallback: Fallback,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Control-plane key for `/admin/*`. Empty disables the admin API (403). The environment
    /// variable `SWITCHYARD_ADMIN_API_KEY` overrides it, to keep secrets out of files.
    /// Its holder acts as the principal `admin`. At least 16 characters; never serialised out.
    pub api_key: Secret,
    /// Named keys: each holder acts as that principal in audit logs and in the two-person
    /// rule for quota overrides (the approver must be a different principal).
    pub keys: Vec<AdminKey>,
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AdminKey {
    pub name: String,
    /// At least 16 characters; never serialised out.
    pub key: Secret,
    /// What the holder may do; `admin` (everything) when absent, as before roles existed.
    #[serde(default)]
    pub role: AdminRole,
}

/// The rights of an admin key's holder.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AdminRole {
    /// Reads only: status, config, quotas, overrides, audit logs.
    Viewer,
    /// Reads, and runs the fleet: sets quotas, proposes overrides, adds and drains workers,
    /// changes the live config.
    Operator,
    /// Reads, and approves or revokes overrides (the second person of the two-person rule).
    Approver,
    /// Everything, including cluster membership and fault injection.
    #[default]
    Admin,
}

impl AdminRole {
    pub fn as_str(self) -> &'static str {
        match self {
            AdminRole::Viewer => "viewer",
            AdminRole::Operator => "operator",
            AdminRole::Approver => "approver",
            AdminRole::Admin => "admin",
        }
    }
}
