//! The list/watch loop: list (a consistent snapshot), then watch from its resource version;
//! a watch the server ends normally is renewed from the last version seen; an expired version
//! (410 Gone, as a status or as an ERROR event) and the periodic resync list again. Errors
//! back off and list again: events missed meanwhile are covered by the next list.

use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::api::{Api, ApiError, WatchEvent};
use super::config::DiscoveryConfig;
use super::metrics::DiscoveryMetrics;
use super::reconcile::Reconciler;
use super::transport::{Transport, TransportError};
use crate::http_client::HttpClient;
use crate::registry::Registry;

const ERROR_BACKOFF: Duration = Duration::from_secs(1);

/// The running discovery task; stopping it leaves the registered workers in place.
pub struct KubernetesDiscovery {
    task: JoinHandle<()>,
}

impl KubernetesDiscovery {
    pub fn stop(&self) {
        self.task.abort();
    }
}

impl Drop for KubernetesDiscovery {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryStartError {
    #[error("discovery metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error(transparent)]
    Transport(#[from] TransportError),
}

/// Starts watching. `metrics` receives the `switchyard_discovery_*` families.
pub fn spawn(
    registry: Registry,
    client: HttpClient,
    config: DiscoveryConfig,
    metrics: &prometheus::Registry,
) -> Result<KubernetesDiscovery, DiscoveryStartError> {
    let transport = Transport::new(client.clone(), &config)?;
    let metrics = DiscoveryMetrics::register(metrics)?;
    let config = DiscoveryConfig {
        namespace: config.effective_namespace(),
        ..config
    };
    let api = Api::new(transport, config.clone());
    let reconciler = Reconciler::new(registry, client, config.clone(), metrics);
    let task = tokio::spawn(run(api, reconciler, config));
    Ok(KubernetesDiscovery { task })
}

enum WatchEnd {
    Resync,
    Expired,
    Failed,
}

async fn run(api: Api, mut reconciler: Reconciler, config: DiscoveryConfig) {
    let resync = Duration::from_millis(config.resync_interval_ms);
    let retry = Duration::from_millis(config.retry_interval_ms);
    let mut reason = "start";
    loop {
        reconciler
            .metrics()
            .lists
            .with_label_values(&[reason])
            .inc();
        let list = match api.list().await {
            Ok(list) => list,
            Err(error) => {
                warn!(%error, "kubernetes discovery: list failed");
                reason = "error";
                tokio::time::sleep(ERROR_BACKOFF).await;
                continue;
            }
        };
        reconciler.sync_all(list.pods).await;
        let deadline = Instant::now() + resync;
        reason = match watch_until(
            &api,
            &mut reconciler,
            list.resource_version,
            deadline,
            retry,
        )
        .await
        {
            WatchEnd::Resync => "periodic",
            WatchEnd::Expired => "expired",
            WatchEnd::Failed => {
                tokio::time::sleep(ERROR_BACKOFF).await;
                "error"
            }
        };
    }
}

async fn watch_until(
    api: &Api,
    reconciler: &mut Reconciler,
    mut version: String,
    deadline: Instant,
    retry: Duration,
) -> WatchEnd {
    let mut retry_tick = tokio::time::interval(retry);
    retry_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let mut stream = match api.watch(&version).await {
            Ok(stream) => stream,
            Err(ApiError::Expired) => return WatchEnd::Expired,
            Err(error) => {
                warn!(%error, "kubernetes discovery: watch failed");
                return WatchEnd::Failed;
            }
        };
        loop {
            let event = tokio::select! {
                event = stream.next() => event,
                _ = tokio::time::sleep_until(deadline) => return WatchEnd::Resync,
                _ = retry_tick.tick() => {
                    reconciler.retry_pending().await;
                    continue;
                }
            };
            let label = match &event {
                Some(Ok(WatchEvent::Upsert(_))) => "upsert",
                Some(Ok(WatchEvent::Deleted(_))) => "deleted",
                Some(Ok(WatchEvent::Bookmark(_))) => "bookmark",
                Some(Err(ApiError::Expired)) => "expired",
                Some(Err(_)) => "error",
                None => "closed",
            };
            reconciler
                .metrics()
                .events
                .with_label_values(&[label])
                .inc();
            match event {
                Some(Ok(WatchEvent::Upsert(pod))) => {
                    version.clone_from(&pod.resource_version);
                    reconciler.upsert(pod).await;
                }
                Some(Ok(WatchEvent::Deleted(pod))) => {
                    version.clone_from(&pod.resource_version);
                    reconciler.forget(&pod.uid).await;
                }
                Some(Ok(WatchEvent::Bookmark(rv))) => version = rv,
                Some(Err(ApiError::Expired)) => return WatchEnd::Expired,
                Some(Err(error)) => {
                    warn!(%error, "kubernetes discovery: watch broke");
                    return WatchEnd::Failed;
                }
                None => {
                    debug!(%version, "kubernetes discovery: watch ended, renewing");
                    break;
                }
            }
        }
    }
}
