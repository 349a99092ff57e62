use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, info, warn};

use crate::handle::WorkerHandle;
use crate::http_client::{HttpClient, get_json};

/// Owns one worker's lifecycle. Today: model discovery. The health checker, metrics collector,
/// hysteresis judge and prober become this actor's children.
pub(crate) struct WorkerActor;

pub(crate) struct WorkerArgs {
    pub handle: Arc<WorkerHandle>,
    pub client: HttpClient,
    pub discovery_retry: Duration,
}

pub(crate) struct WorkerState {
    handle: Arc<WorkerHandle>,
    client: HttpClient,
    discovery_retry: Duration,
}

pub(crate) enum WorkerMsg {
    DiscoverModels,
}

const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(2);

impl Actor for WorkerActor {
    type Msg = WorkerMsg;
    type State = WorkerState;
    type Arguments = WorkerArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        if args.handle.models().is_none() {
            myself.send_message(WorkerMsg::DiscoverModels)?;
        }
        Ok(WorkerState {
            handle: args.handle,
            client: args.client,
            discovery_retry: args.discovery_retry,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            WorkerMsg::DiscoverModels => {
                if discover_models(state).await {
                    return Ok(());
                }
                // Ractor owns the timer task and drops the message if this actor has stopped.
                myself.send_after(state.discovery_retry, || WorkerMsg::DiscoverModels);
            }
        }
        Ok(())
    }
}

async fn discover_models(state: &WorkerState) -> bool {
    let worker = state.handle.name();
    let uri = match state.handle.uri_for("/v1/models") {
        Ok(uri) => uri,
        Err(error) => {
            warn!(worker, %error, "cannot build /v1/models URI");
            return true;
        }
    };
    match get_json(&state.client, uri, DISCOVERY_TIMEOUT).await {
        Ok(body) => {
            let models: Vec<String> = body
                .get("data")
                .and_then(|d| d.as_array())
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|m| m.get("id").and_then(|id| id.as_str()))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            info!(worker, ?models, "discovered models");
            state.handle.set_models(models);
            true
        }
        Err(error) => {
            debug!(worker, %error, "model discovery failed; will retry");
            false
        }
    }
}
