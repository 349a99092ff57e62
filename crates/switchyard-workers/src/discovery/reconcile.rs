//! Pods → registry. Each pod is keyed by its UID: a pod recreated under the same name is a
//! new worker. A pod is registered only when Ready, not terminating, addressed, and its models
//! are known (annotation, label, or its own `/v1/models`); otherwise it waits in `pending`.
//! A pod that stops qualifying is drained, so in-flight requests finish and no new ones land.

use std::collections::{HashMap, HashSet};
use std::time::Duration;
use tracing::{info, warn};

use super::config::DiscoveryConfig;
use super::metrics::DiscoveryMetrics;
use super::pod::PodView;
use crate::http_client::{HttpClient, get_json};
use crate::registry::{Registry, RegistryError};
use crate::spec::WorkerSpec;

const MODELS_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Clone, Debug, PartialEq, Eq)]
struct Registered {
    name: String,
    url: String,
    models: Vec<String>,
}

pub struct Reconciler {
    registry: Registry,
    client: HttpClient,
    config: DiscoveryConfig,
    metrics: DiscoveryMetrics,
    registered: HashMap<String, Registered>,
    pending: HashMap<String, PodView>,
}

impl Reconciler {
    pub fn new(
        registry: Registry,
        client: HttpClient,
        config: DiscoveryConfig,
        metrics: DiscoveryMetrics,
    ) -> Self {
        Self {
            registry,
            client,
            config,
            metrics,
            registered: HashMap::new(),
            pending: HashMap::new(),
        }
    }

    pub fn metrics(&self) -> &DiscoveryMetrics {
        &self.metrics
    }

    /// A full list: every listed pod is applied, every tracked pod not listed is gone.
    pub async fn sync_all(&mut self, pods: Vec<PodView>) {
        let listed: HashSet<String> = pods.iter().map(|p| p.uid.clone()).collect();
        let gone: Vec<String> = self
            .registered
            .keys()
            .chain(self.pending.keys())
            .filter(|uid| !listed.contains(*uid))
            .cloned()
            .collect();
        for uid in gone {
            self.forget(&uid).await;
        }
        for pod in pods {
            self.upsert(pod).await;
        }
    }

    pub async fn upsert(&mut self, pod: PodView) {
        if !pod.routable() {
            self.forget(&pod.uid).await;
            return;
        }
        let Some(url) = pod.url(&self.config) else {
            return;
        };
        let models = match pod.declared_models(&self.config) {
            Some(models) => Some(models),
            None => match self.registered.get(&pod.uid) {
                Some(known) if known.url == url => Some(known.models.clone()),
                _ => self.ask_models(&url).await,
            },
        };
        let Some(models) = models else {
            self.metrics
                .actions
                .with_label_values(&["model_unknown"])
                .inc();
            self.wait(pod);
            return;
        };
        let wanted = Registered {
            name: pod.worker_name(),
            url,
            models,
        };
        if self.registered.get(&pod.uid) == Some(&wanted) {
            self.pending.remove(&pod.uid);
            return;
        }
        if self.registered.contains_key(&pod.uid) {
            self.metrics.actions.with_label_values(&["replaced"]).inc();
            self.retire(&pod.uid).await;
        }
        let spec = WorkerSpec {
            name: wanted.name.clone(),
            url: wanted.url.clone(),
            models: Some(wanted.models.clone()),
            health_path: (!self.config.health_path.is_empty())
                .then(|| self.config.health_path.clone()),
            // Kind-less: health path and metric names found as for any unnamed engine.
            engine: None,
        };
        match self.registry.add(spec).await {
            Ok(_) => {
                info!(worker = %wanted.name, url = %wanted.url, models = ?wanted.models, "discovered worker registered");
                self.metrics.actions.with_label_values(&["added"]).inc();
                self.pending.remove(&pod.uid);
                self.registered.insert(pod.uid.clone(), wanted);
            }
            Err(error) => {
                // Typically the name is still held by a draining predecessor (a StatefulSet
                // pod recreated under its old name): retried until the drain ends.
                if !matches!(error, RegistryError::AlreadyExists(_)) {
                    warn!(%error, pod = %pod.name, "discovered worker not registered");
                }
                self.metrics
                    .actions
                    .with_label_values(&["add_failed"])
                    .inc();
                self.wait(pod);
            }
        }
        self.publish();
    }

    /// A deleted pod, or one that no longer qualifies.
    pub async fn forget(&mut self, uid: &str) {
        self.pending.remove(uid);
        self.retire(uid).await;
        self.publish();
    }

    /// Tries the pods that could not be registered yet again.
    pub async fn retry_pending(&mut self) {
        let waiting: Vec<PodView> = self.pending.values().cloned().collect();
        for pod in waiting {
            self.upsert(pod).await;
        }
    }

    fn wait(&mut self, pod: PodView) {
        self.pending.insert(pod.uid.clone(), pod);
        self.publish();
    }

    async fn retire(&mut self, uid: &str) {
        let Some(known) = self.registered.remove(uid) else {
            return;
        };
        match self.registry.drain(&known.name).await {
            Ok(_) => {
                info!(worker = %known.name, "discovered worker drained");
                self.metrics.actions.with_label_values(&["drained"]).inc();
            }
            Err(RegistryError::NotFound(_)) => {}
            Err(error) => warn!(%error, worker = %known.name, "cannot drain discovered worker"),
        }
    }

    async fn ask_models(&self, url: &str) -> Option<Vec<String>> {
        let uri = format!("{url}/v1/models").parse().ok()?;
        let answer = get_json(&self.client, uri, MODELS_TIMEOUT).await.ok()?;
        let models: Vec<String> = answer["data"]
            .as_array()?
            .iter()
            .filter_map(|m| m["id"].as_str().map(str::to_string))
            .collect();
        (!models.is_empty()).then_some(models)
    }

    fn publish(&self) {
        self.metrics.workers.set(self.registered.len() as i64);
        self.metrics.pending.set(self.pending.len() as i64);
    }
}
