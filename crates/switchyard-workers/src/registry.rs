use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::WorkerId;
use tracing::{error, info, warn};

use crate::directory::WorkerDirectory;
use crate::handle::WorkerHandle;
use crate::http_client::HttpClient;
use crate::spec::{SpecError, WorkerSpec};
use crate::worker_actor::{WorkerActor, WorkerArgs, WorkerMsg};

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
    #[error("worker registry is not running: {0}")]
    Unavailable(String),
}

/// Cheap, cloneable front of the registry actor plus the directory it publishes.
#[derive(Clone)]
pub struct Registry {
    actor: ActorRef<RegistryMsg>,
    directory: Arc<WorkerDirectory>,
}

pub(crate) enum RegistryMsg {
    Add(
        WorkerSpec,
        RpcReplyPort<Result<Arc<WorkerHandle>, RegistryError>>,
    ),
    Remove(
        String,
        RpcReplyPort<Result<Arc<WorkerHandle>, RegistryError>>,
    ),
}

struct Entry {
    handle: Arc<WorkerHandle>,
    actor: ActorRef<WorkerMsg>,
}

struct RegistryState {
    entries: BTreeMap<String, Entry>,
    next_id: u32,
    directory: Arc<WorkerDirectory>,
    observer: Arc<dyn RegistryObserver>,
    client: HttpClient,
}

struct RegistryActor;

struct RegistryArgs {
    directory: Arc<WorkerDirectory>,
    observer: Arc<dyn RegistryObserver>,
    client: HttpClient,
}

const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const DISCOVERY_RETRY: Duration = Duration::from_secs(2);

impl Registry {
    /// Starts the registry actor. The returned join handle ends when [`Registry::stop`] is called.
    pub async fn start(
        client: HttpClient,
        observer: Arc<dyn RegistryObserver>,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), RegistryError> {
        let directory = Arc::new(WorkerDirectory::default());
        let args = RegistryArgs {
            directory: Arc::clone(&directory),
            observer,
            client,
        };
        let (actor, join) = Actor::spawn(None, RegistryActor, args)
            .await
            .map_err(|e| RegistryError::Unavailable(e.to_string()))?;
        Ok((Self { actor, directory }, join))
    }

    pub fn directory(&self) -> &Arc<WorkerDirectory> {
        &self.directory
    }

    pub async fn add(&self, spec: WorkerSpec) -> Result<Arc<WorkerHandle>, RegistryError> {
        spec.validate()?;
        self.call(|reply| RegistryMsg::Add(spec, reply)).await
    }

    pub async fn remove(&self, name: &str) -> Result<Arc<WorkerHandle>, RegistryError> {
        let name = name.to_string();
        self.call(|reply| RegistryMsg::Remove(name, reply)).await
    }

    /// Stops the registry and every worker actor under it.
    pub fn stop(&self) {
        self.actor.stop(None);
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

impl RegistryState {
    fn publish(&self) {
        let workers = self
            .entries
            .values()
            .map(|e| Arc::clone(&e.handle))
            .collect();
        self.directory.publish(workers);
    }

    async fn spawn_worker(
        &self,
        registry: &ActorRef<RegistryMsg>,
        handle: &Arc<WorkerHandle>,
    ) -> Result<ActorRef<WorkerMsg>, RegistryError> {
        let args = WorkerArgs {
            handle: Arc::clone(handle),
            client: self.client.clone(),
            discovery_retry: DISCOVERY_RETRY,
        };
        // Unnamed: ractor's name registry is process-global, and tests and the demo run
        // several gateways in one process.
        let (actor, _join) = Actor::spawn_linked(None, WorkerActor, args, registry.get_cell())
            .await
            .map_err(|e| RegistryError::Unavailable(e.to_string()))?;
        Ok(actor)
    }

    async fn add(
        &mut self,
        registry: &ActorRef<RegistryMsg>,
        spec: WorkerSpec,
    ) -> Result<Arc<WorkerHandle>, RegistryError> {
        if self.entries.contains_key(&spec.name) {
            return Err(RegistryError::AlreadyExists(spec.name));
        }
        let id = WorkerId(self.next_id);
        self.next_id += 1;
        let handle = WorkerHandle::new(id, &spec)
            .map(Arc::new)
            .ok_or_else(|| SpecError::BadUrl(spec.url.clone()))?;
        let actor = self.spawn_worker(registry, &handle).await?;
        info!(worker = handle.name(), url = handle.base_url(), %id, "worker added");
        self.observer.worker_added(&handle);
        self.entries.insert(
            spec.name.clone(),
            Entry {
                handle: Arc::clone(&handle),
                actor,
            },
        );
        self.publish();
        Ok(handle)
    }

    fn remove(&mut self, name: &str) -> Result<Arc<WorkerHandle>, RegistryError> {
        let entry = self
            .entries
            .remove(name)
            .ok_or_else(|| RegistryError::NotFound(name.to_string()))?;
        self.publish();
        entry.actor.stop(Some("removed".into()));
        self.observer.worker_removed(&entry.handle);
        info!(worker = name, "worker removed");
        Ok(entry.handle)
    }
}

impl Actor for RegistryActor {
    type Msg = RegistryMsg;
    type State = RegistryState;
    type Arguments = RegistryArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(RegistryState {
            entries: BTreeMap::new(),
            next_id: 1,
            directory: args.directory,
            observer: args.observer,
            client: args.client,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RegistryMsg::Add(spec, reply) => {
                let _ = reply.send(state.add(&myself, spec).await);
            }
            RegistryMsg::Remove(name, reply) => {
                let _ = reply.send(state.remove(&name));
            }
        }
        Ok(())
    }

    /// A worker actor that fails is restarted with the same handle, so the request path
    /// never notices; one that stops on purpose (removal) is already gone from `entries`.
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ActorFailed(cell, err) = event {
            let failed = state
                .entries
                .iter()
                .find(|(_, e)| e.actor.get_id() == cell.get_id())
                .map(|(name, e)| (name.clone(), Arc::clone(&e.handle)));
            if let Some((name, handle)) = failed {
                error!(worker = %name, error = %err, "worker actor failed; restarting it");
                match state.spawn_worker(&myself, &handle).await {
                    Ok(actor) => {
                        if let Some(entry) = state.entries.get_mut(&name) {
                            entry.actor = actor;
                        }
                    }
                    Err(e) => warn!(worker = %name, error = %e, "worker actor restart failed"),
                }
            }
        }
        Ok(())
    }
}

impl Registry {
    /// Specs of every registered worker, in name order.
    pub fn specs(&self) -> Vec<WorkerSpec> {
        self.directory
            .snapshot()
            .iter()
            .map(|w| WorkerSpec {
                name: w.name().to_string(),
                url: w.base_url().to_string(),
                models: w.models().map(|m| m.as_ref().clone()),
            })
            .collect()
    }
}
