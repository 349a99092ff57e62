//! The registry actor: owns membership and drains, publishes the directory, supervises one
//! `WorkerSupervisor` per worker.

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use std::collections::BTreeMap;
use std::sync::Arc;
use switchyard_core::WorkerId;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use super::drain::{Drain, DrainOutcome};
use super::error::RegistryError;
use super::observer::RegistryObserver;
use crate::config::{HealthConfig, ms};
use crate::directory::WorkerDirectory;
use crate::handle::{HandleContext, WorkerHandle};
use crate::http_client::HttpClient;
use crate::spec::{SpecError, WorkerSpec};
use crate::worker::{WorkerMsg, spawn_supervisor};

pub(crate) enum RegistryMsg {
    Add(
        WorkerSpec,
        RpcReplyPort<Result<Arc<WorkerHandle>, RegistryError>>,
    ),
    Remove(
        String,
        RpcReplyPort<Result<Arc<WorkerHandle>, RegistryError>>,
    ),
    Drain(String, RpcReplyPort<Result<Drain, RegistryError>>),
    DrainFinished {
        id: WorkerId,
        idle: bool,
    },
    ConfigChanged(Arc<HealthConfig>),
}

struct DrainState {
    /// Owned here; aborted if the worker leaves some other way or the registry stops.
    waiter: JoinHandle<()>,
    done: watch::Sender<Option<DrainOutcome>>,
}

struct Entry {
    handle: Arc<WorkerHandle>,
    actor: ActorRef<WorkerMsg>,
    drain: Option<DrainState>,
}

pub(crate) struct RegistryState {
    entries: BTreeMap<String, Entry>,
    next_id: u32,
    directory: Arc<WorkerDirectory>,
    observer: Arc<dyn RegistryObserver>,
    client: HttpClient,
    context: HandleContext,
}

pub(crate) struct RegistryActor;

pub(crate) struct RegistryArgs {
    pub directory: Arc<WorkerDirectory>,
    pub observer: Arc<dyn RegistryObserver>,
    pub client: HttpClient,
    pub context: HandleContext,
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
        spawn_supervisor(handle, &self.client, registry.get_cell())
            .await
            .map_err(|e| RegistryError::Unavailable(e.to_string()))
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
        let handle = WorkerHandle::new(id, &spec, &self.context)
            .map(Arc::new)
            .ok_or_else(|| SpecError::BadUrl(spec.url.clone()))?;
        let actor = match self.spawn_worker(registry, &handle).await {
            Ok(actor) => actor,
            Err(e) => {
                handle.series.forget();
                return Err(e);
            }
        };
        info!(worker = handle.name(), url = handle.base_url(), %id, "worker added");
        self.observer.worker_added(&handle);
        self.entries.insert(
            spec.name.clone(),
            Entry {
                handle: Arc::clone(&handle),
                actor,
                drain: None,
            },
        );
        self.publish();
        Ok(handle)
    }

    fn remove(
        &mut self,
        name: &str,
        outcome: DrainOutcome,
    ) -> Result<Arc<WorkerHandle>, RegistryError> {
        let entry = self
            .entries
            .remove(name)
            .ok_or_else(|| RegistryError::NotFound(name.to_string()))?;
        self.publish();
        entry.actor.stop(Some("removed".into()));
        self.observer.worker_removed(&entry.handle);
        entry.handle.series.forget();
        if let Some(drain) = entry.drain {
            drain.waiter.abort();
            self.context.metrics.drain_finished(match outcome {
                DrainOutcome::Idle => "idle",
                DrainOutcome::TimedOut { .. } => "timed_out",
                DrainOutcome::Interrupted => "interrupted",
            });
            drain.done.send_replace(Some(outcome));
        }
        info!(worker = name, ?outcome, "worker removed");
        Ok(entry.handle)
    }

    fn drain(
        &mut self,
        registry: &ActorRef<RegistryMsg>,
        name: &str,
    ) -> Result<Drain, RegistryError> {
        let timeout = ms(self.context.config.load().drain.timeout_ms);
        let entry = self
            .entries
            .get_mut(name)
            .ok_or_else(|| RegistryError::NotFound(name.to_string()))?;
        let worker = Arc::clone(&entry.handle);
        if let Some(drain) = &entry.drain {
            return Ok(Drain {
                worker,
                done: drain.done.subscribe(),
            });
        }
        worker.start_drain();
        info!(
            worker = name,
            in_flight = worker.in_flight(),
            "draining worker"
        );
        let (done, receiver) = watch::channel(None);
        let waiter = {
            let worker = Arc::clone(&worker);
            let registry = registry.clone();
            tokio::spawn(async move {
                let idle = worker.wait_idle(timeout).await;
                let id = worker.id();
                let _ = registry.send_message(RegistryMsg::DrainFinished { id, idle });
            })
        };
        entry.drain = Some(DrainState { waiter, done });
        Ok(Drain {
            worker,
            done: receiver,
        })
    }

    fn drain_finished(&mut self, id: WorkerId, idle: bool) {
        let Some((name, in_flight)) = self
            .entries
            .iter()
            .find(|(_, e)| e.handle.id() == id)
            .map(|(name, e)| (name.clone(), e.handle.in_flight()))
        else {
            return;
        };
        let outcome = if idle {
            DrainOutcome::Idle
        } else {
            warn!(worker = %name, in_flight, "drain timed out; removing the worker anyway");
            DrainOutcome::TimedOut { in_flight }
        };
        let _ = self.remove(&name, outcome);
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
            context: args.context,
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
                let _ = reply.send(state.remove(&name, DrainOutcome::Interrupted));
            }
            RegistryMsg::Drain(name, reply) => {
                let _ = reply.send(state.drain(&myself, &name));
            }
            RegistryMsg::DrainFinished { id, idle } => state.drain_finished(id, idle),
            RegistryMsg::ConfigChanged(config) => {
                for entry in state.entries.values() {
                    let _ = entry
                        .actor
                        .send_message(WorkerMsg::ConfigChanged(Arc::clone(&config)));
                }
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        for entry in state.entries.values_mut() {
            if let Some(drain) = entry.drain.take() {
                drain.waiter.abort();
                drain.done.send_replace(Some(DrainOutcome::Interrupted));
            }
        }
        Ok(())
    }

    /// A worker supervisor that fails is restarted with the same handle, so the request
    /// path never notices; one that stops on purpose (removal) is already gone from `entries`.
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
                error!(worker = %name, error = %err, "worker supervisor failed; restarting it");
                match state.spawn_worker(&myself, &handle).await {
                    Ok(actor) => {
                        if let Some(entry) = state.entries.get_mut(&name) {
                            entry.actor = actor;
                        }
                    }
                    Err(e) => warn!(worker = %name, error = %e, "worker supervisor restart failed"),
                }
            }
        }
        Ok(())
    }
}
