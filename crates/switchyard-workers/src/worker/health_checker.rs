//! Child actor: probes the worker's health path and reports each result to the supervisor.

use ractor::{Actor, ActorProcessingErr, ActorRef};
use std::time::{Duration, Instant};
use tracing::debug;

use super::{ChildArgs, Tick, WorkerMsg};
use crate::config::ms;
use crate::http_client::{fetch, get_request};

/// Health answers are tiny; anything bigger is still read but capped.
const MAX_BODY: usize = 64 * 1024;

pub(crate) struct HealthChecker;

impl Actor for HealthChecker {
    type Msg = Tick;
    type State = ChildArgs;
    type Arguments = ChildArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_message(Tick)?;
        Ok(args)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        _tick: Tick,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let config = state.handle.config.load();
        let started = Instant::now();
        let success = check(state, Duration::from_millis(config.health.timeout_ms)).await;
        // The supervisor is our parent: if it is gone, so are we in a moment.
        let _ = state.supervisor.send_message(WorkerMsg::Health(success));
        // A failure on a still-healthy worker is re-checked sooner, so the failover needs
        // one interval plus a few short ones instead of `unhealthy_threshold` intervals.
        let period = if !success && state.handle.is_healthy() {
            ms(config.health.suspect_interval_ms)
        } else {
            ms(config.health.interval_ms)
        };
        myself.send_after(period.saturating_sub(started.elapsed()), || Tick);
        Ok(())
    }
}

async fn check(state: &ChildArgs, timeout: Duration) -> bool {
    let config = state.handle.config.load();
    let path = state.handle.health_path().unwrap_or(&config.health.path);
    let worker = state.handle.name();
    let request = match state.handle.uri_for(path).map(get_request) {
        Ok(Ok(request)) => request,
        Ok(Err(error)) => {
            debug!(worker, %error, "cannot build health request");
            return false;
        }
        Err(error) => {
            debug!(worker, %error, "cannot build health URI");
            return false;
        }
    };
    match fetch(&state.client, request, timeout, MAX_BODY).await {
        Ok((status, _)) if status.is_success() => true,
        Ok((status, _)) => {
            debug!(worker, %status, "health check failed");
            false
        }
        Err(error) => {
            debug!(worker, %error, "health check failed");
            false
        }
    }
}
