//! One supervisor actor per worker, with its children:
//!
//! ```text
//! WorkerSupervisor   owns the health streaks, the hysteresis judge and the hung check (WorkerCore)
//! ├── HealthChecker  probes the health path every interval
//! ├── Collector      scrapes /metrics (or gateway observations), publishes p90s
//! ├── Prober         only while overloaded or hung: traffic-shaped streamed probes
//! └── Discovery      until the worker's models and context length are known
//! ```
//!
//! Children do the I/O and report to the supervisor; the supervisor owns the decisions and
//! publishes them on the `WorkerHandle`. A failed child is restarted on its own and the
//! worker's state is untouched; a restarted supervisor resumes from what the handle shows.

mod collector;
mod decisions;
mod discovery;
mod health_checker;
mod hung;
mod messages;
mod periodic;
mod probe_timing;
mod prober;

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use std::sync::Arc;
use tracing::{error, warn};

use crate::config::ms;
use crate::handle::WorkerHandle;
use crate::http_client::HttpClient;
use collector::Collector;
use decisions::WorkerCore;
use discovery::Discovery;
use health_checker::HealthChecker;
use messages::ChildArgs;
pub(crate) use messages::WorkerMsg;
use periodic::{Tick, spawn_child};
use prober::{Prober, ProberArgs};

pub(crate) struct WorkerSupervisor;

pub(crate) struct SupervisorArgs {
    pub handle: Arc<WorkerHandle>,
    pub client: HttpClient,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChildKind {
    Health,
    Collector,
    Prober,
    Discovery,
}

pub(crate) struct SupervisorState {
    core: WorkerCore,
    handle: Arc<WorkerHandle>,
    client: HttpClient,
    children: Vec<(ChildKind, ActorRef<Tick>)>,
    prober_generation: u64,
}

impl SupervisorState {
    async fn spawn(&mut self, kind: ChildKind, myself: &ActorRef<WorkerMsg>) {
        let args = ChildArgs {
            handle: Arc::clone(&self.handle),
            client: self.client.clone(),
            supervisor: myself.clone(),
        };
        let cell = myself.get_cell();
        let spawned = match kind {
            ChildKind::Health => spawn_child::<HealthChecker>(args, cell).await,
            ChildKind::Collector => spawn_child::<Collector>(args, cell).await,
            ChildKind::Discovery => spawn_child::<Discovery>(args, cell).await,
            ChildKind::Prober => {
                self.prober_generation += 1;
                let args = ProberArgs {
                    child: args,
                    generation: self.prober_generation,
                };
                spawn_child::<Prober>(args, cell).await
            }
        };
        match spawned {
            Ok((actor, _join)) => self.children.push((kind, actor)),
            Err(e) => error!(worker = self.handle.name(), ?kind, error = %e, "cannot start child"),
        }
    }

    fn take_child(&mut self, id: ActorId) -> Option<ChildKind> {
        let index = self.children.iter().position(|(_, a)| a.get_id() == id)?;
        Some(self.children.swap_remove(index).0)
    }

    /// Starts the prober when the worker is marked, stops it when the mark is gone.
    async fn sync_prober(&mut self, myself: &ActorRef<WorkerMsg>) {
        let running = self
            .children
            .iter()
            .position(|(k, _)| *k == ChildKind::Prober);
        match (self.core.wants_prober(), running) {
            (true, None) => self.spawn(ChildKind::Prober, myself).await,
            (false, Some(index)) => {
                let (_, prober) = self.children.swap_remove(index);
                prober.stop(Some("overload mark cleared".into()));
            }
            _ => {}
        }
    }

    fn should_restart(&self, kind: ChildKind) -> bool {
        match kind {
            ChildKind::Health | ChildKind::Collector => true,
            ChildKind::Prober => self.core.wants_prober(),
            ChildKind::Discovery => self.handle.models().is_none(),
        }
    }
}

impl Actor for WorkerSupervisor {
    type Msg = WorkerMsg;
    type State = SupervisorState;
    type Arguments = SupervisorArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(SupervisorState {
            core: WorkerCore::new(Arc::clone(&args.handle)),
            handle: args.handle,
            client: args.client,
            children: Vec::new(),
            prober_generation: 0,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let period = ms(state.handle.config.load().hung.check_interval_ms);
        myself.send_after(period, || WorkerMsg::Watch);
        state.spawn(ChildKind::Health, &myself).await;
        state.spawn(ChildKind::Collector, &myself).await;
        // Also for configured models: the context length comes from `/v1/models` too.
        state.spawn(ChildKind::Discovery, &myself).await;
        state.sync_prober(&myself).await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let config = state.handle.config.load();
        match message {
            WorkerMsg::Health(success) => state.core.on_health(success, &config),
            WorkerMsg::Window(figures) => state.core.on_window(&figures, &config),
            WorkerMsg::Probe { generation, result } => {
                // A result from a prober of an earlier overload episode says nothing now.
                if generation == state.prober_generation {
                    state.core.on_probe(result, &config);
                }
            }
            WorkerMsg::ConfigChanged(new) => state.core.on_config(&new),
            WorkerMsg::Watch => {
                state.core.on_watch(&config);
                myself.send_after(ms(config.hung.check_interval_ms), || WorkerMsg::Watch);
            }
        }
        state.sync_prober(&myself).await;
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, failure) = match event {
            SupervisionEvent::ActorFailed(cell, err) => (cell, Some(err)),
            SupervisionEvent::ActorTerminated(cell, _, _) => (cell, None),
            _ => return Ok(()),
        };
        // Children stopped on purpose (an idle prober) are already gone from the list.
        let Some(kind) = state.take_child(cell.get_id()) else {
            return Ok(());
        };
        if let Some(err) = failure {
            warn!(worker = state.handle.name(), ?kind, error = %err, "child failed");
        }
        // Discovery stops itself once models are known; everything else comes back.
        if state.should_restart(kind) {
            state.spawn(kind, &myself).await;
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "supervisor_tests.rs"]
mod tests;

/// Spawns a worker's supervisor under `parent` (the registry actor).
pub(crate) async fn spawn_supervisor(
    handle: &Arc<WorkerHandle>,
    client: &HttpClient,
    parent: ActorCell,
) -> Result<ActorRef<WorkerMsg>, ractor::SpawnErr> {
    let args = SupervisorArgs {
        handle: Arc::clone(handle),
        client: client.clone(),
    };
    // Unnamed: ractor's name registry is process-global, and tests and the demo run
    // several gateways in one process.
    let (actor, _join) = Actor::spawn_linked(None, WorkerSupervisor, args, parent).await?;
    Ok(actor)
}
