use arc_swap::ArcSwapOption;
use http::Uri;
use http::uri::{Authority, PathAndQuery, Scheme};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use switchyard_core::WorkerId;

use crate::spec::WorkerSpec;

/// The request path's view of one worker: identity, address, discovered models and live load.
/// Shared by `Arc`; an in-flight request keeps its handle alive even after the worker is removed.
#[derive(Debug)]
pub struct WorkerHandle {
    id: WorkerId,
    name: Arc<str>,
    base_url: String,
    authority: Authority,
    models: ArcSwapOption<Vec<String>>,
    in_flight: AtomicU64,
}

impl WorkerHandle {
    pub(crate) fn new(id: WorkerId, spec: &WorkerSpec) -> Option<Self> {
        let uri: Uri = spec.base_url().parse().ok()?;
        let authority = uri.authority()?.clone();
        Some(Self {
            id,
            name: Arc::from(spec.name.as_str()),
            base_url: spec.base_url().to_string(),
            authority,
            models: ArcSwapOption::new(spec.models.clone().map(Arc::new)),
            in_flight: AtomicU64::new(0),
        })
    }

    pub fn id(&self) -> WorkerId {
        self.id
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The upstream URI for `path` (which must start with `/`).
    pub fn uri_for(&self, path: &str) -> Result<Uri, http::Error> {
        Uri::builder()
            .scheme(Scheme::HTTP)
            .authority(self.authority.clone())
            .path_and_query(PathAndQuery::try_from(path)?)
            .build()
    }

    /// Models the worker serves; `None` until discovered (then it may serve anything).
    pub fn models(&self) -> Option<Arc<Vec<String>>> {
        self.models.load_full()
    }

    pub(crate) fn set_models(&self, models: Vec<String>) {
        self.models.store(Some(Arc::new(models)));
    }

    /// Whether this worker may serve `model`. A worker whose models are not known yet is
    /// optimistic, so a slow `/v1/models` never makes a healthy fleet answer 404.
    pub fn serves(&self, model: &str) -> bool {
        match &*self.models.load() {
            Some(models) => models.iter().any(|m| m == model),
            None => true,
        }
    }

    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// Counts a request as in flight until the guard drops (response finished, failed or
    /// abandoned by the client).
    pub fn start_request(self: &Arc<Self>) -> InFlightGuard {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlightGuard {
            worker: Arc::clone(self),
        }
    }
}

/// Decrements the worker's in-flight count on drop.
#[derive(Debug)]
pub struct InFlightGuard {
    worker: Arc<WorkerHandle>,
}

impl InFlightGuard {
    pub fn worker(&self) -> &Arc<WorkerHandle> {
        &self.worker
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.worker.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handle(models: Option<Vec<String>>) -> Arc<WorkerHandle> {
        let spec = WorkerSpec {
            name: "a".into(),
            url: "http://127.0.0.1:9000/".into(),
            models,
        };
        Arc::new(WorkerHandle::new(WorkerId(1), &spec).unwrap())
    }

    #[test]
    fn in_flight_follows_guards() {
        let w = handle(None);
        let g1 = w.start_request();
        let g2 = w.start_request();
        assert_eq!(w.in_flight(), 2);
        drop(g1);
        assert_eq!(w.in_flight(), 1);
        drop(g2);
        assert_eq!(w.in_flight(), 0);
    }

    #[test]
    fn unknown_models_serve_anything_known_models_filter() {
        let w = handle(None);
        assert!(w.serves("x"));
        w.set_models(vec!["m".into()]);
        assert!(w.serves("m"));
        assert!(!w.serves("x"));
    }

    #[test]
    fn builds_upstream_uris() {
        let w = handle(None);
        assert_eq!(
            w.uri_for("/v1/models").unwrap().to_string(),
            "http://127.0.0.1:9000/v1/models"
        );
    }
}
