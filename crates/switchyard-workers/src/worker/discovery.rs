//! Child actor: learns the worker's models and context length from `GET /v1/models`,
//! retrying until it succeeds, then stops. A worker whose models are configured keeps them and
//! is asked only for its context length, a bounded number of times (a plain OpenAI-compatible
//! upstream may have no such endpoint). Its own actor so a hanging worker never blocks the
//! supervisor.

use std::time::Duration;
use tracing::{debug, info, warn};

use super::messages::ChildArgs;
use super::periodic::{Next, Round};
use crate::engine::max_model_len;
use crate::http_client::get_json;

const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(2);
pub(crate) const DISCOVERY_RETRY: Duration = Duration::from_secs(2);
/// Tries for the context length of a worker whose models are configured (a minute).
const CONTEXT_TRIES: u32 = 30;

pub(crate) struct Discovery;

impl Round for Discovery {
    type Arguments = ChildArgs;
    /// The worker, and the tries so far.
    type State = (ChildArgs, u32);

    fn start(args: ChildArgs) -> ((ChildArgs, u32), Option<Duration>) {
        ((args, 0), None)
    }

    async fn round(state: &mut (ChildArgs, u32)) -> Next {
        let (args, tries) = state;
        *tries += 1;
        let configured = args.handle.models().is_some();
        if discover_models(args, configured).await || (configured && *tries >= CONTEXT_TRIES) {
            Next::Stop("models discovered")
        } else {
            Next::After(DISCOVERY_RETRY)
        }
    }
}

/// `true` when done (models known, or the URI can never work). A worker with `configured`
/// models keeps them; only its context length is learned.
async fn discover_models(state: &ChildArgs, configured: bool) -> bool {
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
            let items = body
                .get("data")
                .and_then(|d| d.as_array())
                .map(Vec::as_slice)
                .unwrap_or_default();
            let models: Vec<String> = items
                .iter()
                .filter_map(|m| m.get("id").and_then(|id| id.as_str()))
                .map(str::to_string)
                .collect();
            // The smallest stated context of the worker's models bounds what it can take.
            let max_model_len = items.iter().filter_map(max_model_len).min();
            info!(worker, ?models, ?max_model_len, "discovered models");
            if let Some(tokens) = max_model_len {
                state.handle.set_max_model_len(tokens);
            }
            if !configured {
                state.handle.set_models(models);
            }
            true
        }
        Err(error) => {
            debug!(worker, %error, "model discovery failed; will retry");
            false
        }
    }
}
