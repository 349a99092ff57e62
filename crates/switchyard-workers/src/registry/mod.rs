//! The registry's public face: membership, draining, hot-reloaded health configuration and
//! the status snapshot. Membership changes go through the registry actor (`actor.rs`);
//! reads come from the published directory.
//!
//! Removal semantics: `drain` (operator) stops new requests, waits for in-flight ones
//! (bounded by `drain.timeout_ms`), then deletes the worker. Health is different: an
//! unhealthy worker only leaves the candidate set (`Routability::Unhealthy`) and stays
//! registered, still checked, so it comes back after `healthy_threshold` successes.

mod actor;

use ractor::{Actor, ActorRef, RpcReplyPort};
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{Clock, SystemClock};
use tokio::sync::watch;

use crate::config::{ConfigCell, HealthConfig, HealthConfigError};
use crate::directory::WorkerDirectory;
use crate::handle::{HandleContext, WorkerHandle};
use crate::http_client::HttpClient;
use crate::metrics::WorkerMetrics;
use crate::spec::{SpecError, WorkerSpec};
use crate::status::WorkerStatus;
pub(crate) use actor::RegistryMsg;
use actor::{RegistryActor, RegistryArgs};

/// Told about membership changes, synchronously from the registry actor, so routing
/// structures forget a removed worker before the next snapshot is read.
pub trait RegistryObserver: Send + Sync + 'static {
    fn worker_added(&self, worker: &Arc<WorkerHandle>);
    fn worker_removed(&self, worker: &Arc<WorkerHandle>);
}

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

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DrainOutcome {
    /// Every in-flight request finished; the worker was removed.
    Idle,
    /// `drain.timeout_ms` passed; the worker was removed with these still running (they keep
    /// their handle and end on their own).
    TimedOut { in_flight: u64 },
    /// The worker was removed some other way, or the registry stopped.
    Interrupted,
}

/// A drain in progress; the worker is already out of the candidate set.
#[derive(Debug)]
pub struct Drain {
    worker: Arc<WorkerHandle>,
    done: watch::Receiver<Option<DrainOutcome>>,
}

impl Drain {
    pub fn worker(&self) -> &Arc<WorkerHandle> {
        &self.worker
    }

    /// Waits until the worker has left the registry.
    pub async fn finished(mut self) -> DrainOutcome {
        match self.done.wait_for(Option::is_some).await {
            Ok(outcome) => (*outcome).unwrap_or(DrainOutcome::Interrupted),
            Err(_) => DrainOutcome::Interrupted,
        }
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
