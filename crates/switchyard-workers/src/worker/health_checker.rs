//! Child actor: probes the worker's health path and reports each result to the supervisor.

use std::time::Duration;
use tracing::debug;

use super::messages::{ChildArgs, WorkerMsg};
use super::periodic::{Next, Round};
use crate::config::ms;
use crate::http_client::{fetch, get_request};

/// Health answers are tiny; anything bigger is still read but capped.
const MAX_BODY: usize = 64 * 1024;

pub(crate) struct HealthChecker;

impl Round for HealthChecker {
    type Arguments = ChildArgs;
    type State = ChildArgs;

    fn start(args: ChildArgs) -> (ChildArgs, Option<Duration>) {
        (args, None)
    }

    async fn round(state: &mut ChildArgs) -> Next {
        let config = state.handle.config.load();
        let success = check(state, Duration::from_millis(config.health.timeout_ms)).await;
        // The supervisor is our parent: if it is gone, so are we in a moment.
        let _ = state.supervisor.send_message(WorkerMsg::Health(success));
        // A failure on a still-healthy worker is re-checked sooner, so the failover needs
        // one interval plus a few short ones instead of `unhealthy_threshold` intervals.
        Next::Every(if !success && state.handle.is_healthy() {
            ms(config.health.suspect_interval_ms)
        } else {
            ms(config.health.interval_ms)
        })
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
