//! Worker discovery in Kubernetes: pods chosen by a label selector are watched through the
//! API server's HTTP API and fed to the [`Registry`](crate::Registry) — added once Ready and
//! once their model is known, drained when they stop being Ready or go away.
//!
//! `config` (what to watch), `pod` (the few fields of a Pod that matter), `api` (list and
//! watch), `transport` (plain HTTP, or HTTPS verified against the cluster CA), `reconcile`
//! (pods → registry), `watcher` (the list/watch/re-list loop).

mod api;
mod config;
mod metrics;
mod pod;
mod reconcile;
mod transport;
mod watcher;

pub use api::ApiError;
pub use config::{DiscoveryConfig, DiscoveryConfigError};
pub use pod::PodView;
pub use transport::TransportError;
pub use watcher::{DiscoveryStartError, KubernetesDiscovery, spawn};
