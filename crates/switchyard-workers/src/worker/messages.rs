//! What the supervisor and its children share: the supervisor's messages and what every
//! child is started with. Its own file so the children and the supervisor both depend on it
//! and neither depends on the other.

use ractor::ActorRef;
use std::sync::Arc;

use super::decisions::ProbeResult;
use crate::config::HealthConfig;
use crate::handle::WorkerHandle;
use crate::http_client::HttpClient;
use crate::latency::LatencyFigures;

/// What every child needs.
#[derive(Clone)]
pub(crate) struct ChildArgs {
    pub handle: Arc<WorkerHandle>,
    pub client: HttpClient,
    pub supervisor: ActorRef<WorkerMsg>,
}

pub(crate) enum WorkerMsg {
    Health(bool),
    Window(LatencyFigures),
    Probe {
        generation: u64,
        result: ProbeResult,
    },
    ConfigChanged(Arc<HealthConfig>),
    /// The supervisor's own periodic hung check.
    Watch,
}
