//! The worker registry.
//!
//! Each inference worker is owned by its own supervised ractor actor (`WorkerActor`), a child of
//! the `RegistryActor`. The actors own everything with a lifecycle (model discovery now; health,
//! collector, judge and prober later). The request path never talks to an actor: it reads the
//! published [`WorkerDirectory`] snapshot and the atomics on each [`WorkerHandle`].

mod directory;
mod handle;
mod http_client;
mod registry;
mod spec;
mod worker_actor;

pub use directory::WorkerDirectory;
pub use handle::{InFlightGuard, WorkerHandle};
pub use http_client::{HttpClient, HttpClientConfig, build_http_client, get_json};
pub use registry::{Registry, RegistryError, RegistryObserver};
pub use spec::{SpecError, WorkerSpec};
