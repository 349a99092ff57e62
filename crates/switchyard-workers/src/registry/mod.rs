//! The registry's public face: membership, draining, hot-reloaded health configuration and
//! the status snapshot. Membership changes go through the registry actor (`actor.rs`);
//! reads come from the published directory.
//!
//! Removal semantics: `drain` (operator) stops new requests, waits for in-flight ones
//! (bounded by `drain.timeout_ms`), then deletes the worker. Health is different: an
//! unhealthy worker only leaves the candidate set (`Routability::Unhealthy`) and stays
//! registered, still checked, so it comes back after `healthy_threshold` successes.

mod actor;
mod drain;
mod error;
mod observer;

use ractor::{Actor, ActorRef, RpcReplyPort};
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{Clock, SystemClock};

use crate::config::{ConfigCell, HealthConfig};
use crate::directory::WorkerDirectory;
use crate::handle::{HandleContext, WorkerHandle};
use crate::http_client::HttpClient;
use crate::metrics::WorkerMetrics;
use crate::spec::WorkerSpec;
use crate::status::WorkerStatus;
use actor::{RegistryActor, RegistryArgs, RegistryMsg};
pub use drain::{Drain, DrainOutcome};
pub use error::RegistryError;
pub use observer::RegistryObserver;

/// How the registry watches workers, where its metrics go, and which clock its circuit
/// breakers read.
pub struct RegistryOptions {
    pub health: HealthConfig,
    pub metrics: prometheus::Registry,
    pub clock: Arc<dyn Clock>,
}

impl RegistryOptions {
    /// `metrics` receives the `switchyard_worker_*` families (once per registry).
    pub fn new(health: HealthConfig, metrics: &prometheus::Registry) -> Self {
        Self {
            health,
            metrics: metrics.clone(),
            clock: Arc::new(SystemClock),
        }
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }
}

/// Cheap, cloneable front of the registry actor plus what it publishes.
#[derive(Clone)]
pub struct Registry {
    actor: ActorRef<RegistryMsg>,
    directory: Arc<WorkerDirectory>,
    config: Arc<ConfigCell>,
}

const CALL_TIMEOUT: Duration = Duration::from_secs(10);

impl Registry {
    /// Starts the registry actor. The returned join handle ends when [`Registry::stop`] is called.
    pub async fn start(
        client: HttpClient,
        observer: Arc<dyn RegistryObserver>,
        options: RegistryOptions,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), RegistryError> {
        options.health.validate()?;
        let directory = Arc::new(WorkerDirectory::default());
        let config = Arc::new(ConfigCell::new(options.health));
        let context = HandleContext {
            config: Arc::clone(&config),
            clock: options.clock,
            metrics: Arc::new(WorkerMetrics::register(&options.metrics)?),
            upstream: client.upstream().clone(),
        };
        let args = RegistryArgs {
            directory: Arc::clone(&directory),
            observer,
            client,
            context,
        };
        let (actor, join) = Actor::spawn(None, RegistryActor, args)
            .await
            .map_err(|e| RegistryError::Unavailable(e.to_string()))?;
        Ok((
            Self {
                actor,
                directory,
                config,
            },
            join,
        ))
    }

    pub fn directory(&self) -> &Arc<WorkerDirectory> {
        &self.directory
    }

    pub async fn add(&self, spec: WorkerSpec) -> Result<Arc<WorkerHandle>, RegistryError> {
        spec.validate()?;
        self.call(|reply| RegistryMsg::Add(spec, reply)).await
    }

    /// Removes a worker at once, without draining (in-flight requests keep their handle).
    pub async fn remove(&self, name: &str) -> Result<Arc<WorkerHandle>, RegistryError> {
        let name = name.to_string();
        self.call(|reply| RegistryMsg::Remove(name, reply)).await
    }

    /// Puts the worker in `draining` (no new requests), then removes it once its in-flight
    /// requests finish or `drain.timeout_ms` passes. Returns as soon as draining has begun;
    /// draining an already draining worker joins that drain.
    pub async fn drain(&self, name: &str) -> Result<Drain, RegistryError> {
        let name = name.to_string();
        self.call(|reply| RegistryMsg::Drain(name, reply)).await
    }

    /// Stops the registry and every worker actor under it.
    pub fn stop(&self) {
        self.actor.stop(None);
    }

    /// Specs of every registered worker, in name order.
    pub fn specs(&self) -> Vec<WorkerSpec> {
        self.directory.snapshot().iter().map(|w| w.spec()).collect()
    }

    /// State, latest p90s and counters of every registered worker (draining ones included).
    pub fn snapshot(&self) -> Vec<WorkerStatus> {
        self.directory
            .snapshot()
            .iter()
            .map(|w| w.status())
            .collect()
    }

    pub fn health_config(&self) -> Arc<HealthConfig> {
        self.config.load()
    }

    /// Validates, then swaps the live configuration. The request path sees the new
    /// `latency_aware.active` at once; the worker actors apply breaker parameters and clear
    /// marks (when switched off) as soon as they are told, and read new intervals and
    /// thresholds on their next tick, without restarting.
    pub fn update_health_config(&self, new: HealthConfig) -> Result<(), RegistryError> {
        new.validate()?;
        let new = Arc::new(new);
        self.config.store(Arc::clone(&new));
        self.actor
            .send_message(RegistryMsg::ConfigChanged(new))
            .map_err(|e| RegistryError::Unavailable(e.to_string()))
    }

    async fn call<T: Send + 'static>(
        &self,
        build: impl FnOnce(RpcReplyPort<Result<T, RegistryError>>) -> RegistryMsg,
    ) -> Result<T, RegistryError> {
        match self.actor.call(build, Some(CALL_TIMEOUT)).await {
            Ok(ractor::rpc::CallResult::Success(result)) => result,
            Ok(_) => Err(RegistryError::Unavailable("call timed out".into())),
            Err(e) => Err(RegistryError::Unavailable(e.to_string())),
        }
    }
}
