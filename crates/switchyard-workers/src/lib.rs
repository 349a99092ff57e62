//! The worker registry and the per-worker actor tree.
//!
//! Each inference worker is owned by its own supervisor actor, a child of the registry actor,
//! with children of its own: a health checker, a latency collector, a prober (only while the
//! worker is marked overloaded) and model discovery. The supervisor owns the decisions (health
//! streaks, the hysteresis judge); the circuit breaker lives on the handle because the
//! request path feeds it. The request path never talks to an actor: it reads the published
//! [`WorkerDirectory`] snapshot and the atomics on each [`WorkerHandle`]
//! ([`WorkerHandle::routability`]), and reports back through
//! [`WorkerHandle::record_outcome`] and [`WorkerHandle::observe_latency`].
//!
//! Everything tunable is one hot-reloadable [`HealthConfig`]
//! ([`Registry::update_health_config`]).

mod breaker;
mod breaker_gate;
mod config;
mod directory;
pub mod discovery;
mod engine;
mod engine_error;
mod handle;
mod handle_health;
mod health_tracker;
mod http_client;
mod judge;
mod latency;
mod metrics;
mod progress;
mod registry;
mod spec;
mod status;
mod upstream;
mod worker;

pub use breaker::BreakerState;
pub use breaker_gate::CallOutcome;
pub use config::{
    BreakerConfig, DrainConfig, HealthCheckConfig, HealthConfig, HealthConfigError, HungConfig,
    LatencyAwareConfig, ProberConfig,
};
pub use directory::WorkerDirectory;
pub use engine::{EngineKind, EngineLoad, error_message, max_model_len};
pub use engine_error::openai_error;
pub use handle::{InFlightGuard, WorkerHandle};
pub use http_client::{HttpClient, HttpClientConfig, build_http_client, get_json};
pub use latency::{LatencyFigures, LatencySource};
pub use registry::{
    Drain, DrainOutcome, Registry, RegistryError, RegistryObserver, RegistryOptions,
};
pub use spec::{SpecError, WorkerSpec};
pub use status::{Routability, StatusCounters, WorkerState, WorkerStatus};
pub use upstream::{UpstreamConnector, UpstreamError};
