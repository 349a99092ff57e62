use arc_swap::ArcSwapOption;
use bytes::Bytes;
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::Incoming;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use switchyard_core::{Clock, WorkerId};
use tokio::sync::{Notify, watch};

use crate::breaker::BreakerParams;
use crate::breaker_gate::BreakerGate;
use crate::config::ConfigCell;
use crate::engine::{EngineKind, EngineLoad};
use crate::latency::{LatencyFigures, ObservedLatency, PrefillRate};
use crate::metrics::{WorkerMetrics, WorkerSeries};
use crate::progress::Progress;
use crate::spec::WorkerSpec;
use crate::status::WorkerFlags;
use crate::upstream::{ConnectionPool, UpstreamConnector, UpstreamError};

/// The request path's view of one worker: identity, address, discovered models, live load,
/// and its published condition (health, overload mark, draining, circuit breaker).
/// Shared by `Arc`; an in-flight request keeps its handle alive even after the worker is removed.
/// Health-related methods live in `handle_health.rs`.
#[derive(Debug)]
pub struct WorkerHandle {
    id: WorkerId,
    name: Arc<str>,
    base_url: String,
    /// `http`, or `https` for a worker behind TLS.
    scheme: Scheme,
    authority: Authority,
    /// [`PREBUILT_PATHS`] as request targets (origin form), built once here: nearly every
    /// request goes to one of them, and building one per attempt parses and copies its path.
    prebuilt_targets: Vec<(&'static str, Uri)>,
    /// Idle keep-alive connections to this worker, for the request path.
    connections: ConnectionPool,
    /// The `Host` header for requests to this worker (what the HTTP client would otherwise
    /// format for every request), and the worker's name as a header value.
    host_header: Option<HeaderValue>,
    name_header: Option<HeaderValue>,
    health_path: Option<String>,
    engine: Option<EngineKind>,
    models: ArcSwapOption<Vec<String>>,
    /// Context length from `/v1/models` (0: not stated).
    max_model_len: AtomicU64,
    /// The engine's own load gauges, from the last `/metrics` scrape.
    pub(crate) engine_load: ArcSwapOption<EngineLoad>,
    in_flight: AtomicU64,
    pub(crate) flags: WorkerFlags,
    pub(crate) config: Arc<ConfigCell>,
    pub(crate) breaker: BreakerGate,
    pub(crate) observed: ObservedLatency,
    /// Time to first byte per prompt token on finished streams (first-byte deadlines).
    pub(crate) prefill: PrefillRate,
    pub(crate) latency: ArcSwapOption<LatencyFigures>,
    pub(crate) series: WorkerSeries,
    /// Woken when the last in-flight request of a draining worker ends.
    idle: Notify,
    /// Silence while busy: the input of hung detection (`progress.rs`).
    pub(crate) progress: Progress,
    /// Bumped each time the worker is taken out of routing (unhealthy, circuit open,
    /// overloaded, hung): requests waiting on it for a first byte leave at once.
    pub(crate) filtered: watch::Sender<u64>,
}

/// What every handle of one registry shares.
#[derive(Clone)]
pub(crate) struct HandleContext {
    pub config: Arc<ConfigCell>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<WorkerMetrics>,
    pub upstream: UpstreamConnector,
}

impl WorkerHandle {
    pub(crate) fn new(id: WorkerId, spec: &WorkerSpec, ctx: &HandleContext) -> Option<Self> {
        let uri: Uri = spec.base_url().parse().ok()?;
        let authority = uri.authority()?.clone();
        let scheme = uri.scheme()?.clone();
        let host_header = host_header(&uri);
        let prebuilt_targets = PREBUILT_PATHS
            .iter()
            .map(|path| (*path, Uri::from_static(path)))
            .collect();
        let destination = build_uri(&scheme, &authority, PathAndQuery::from_static("/")).ok()?;
        let connections =
            ConnectionPool::new(ctx.upstream.clone(), destination, host_header.clone());
        let breaker = BreakerParams::from_config(&ctx.config.load().breaker);
        Some(Self {
            id,
            name: Arc::from(spec.name.as_str()),
            base_url: spec.base_url().to_string(),
            scheme,
            authority,
            prebuilt_targets,
            connections,
            host_header,
            name_header: HeaderValue::from_str(&spec.name).ok(),
            health_path: spec.health_path.clone(),
            engine: spec.engine,
            models: ArcSwapOption::new(spec.models.clone().map(Arc::new)),
            max_model_len: AtomicU64::new(0),
            engine_load: ArcSwapOption::empty(),
            in_flight: AtomicU64::new(0),
            flags: WorkerFlags::default(),
            config: Arc::clone(&ctx.config),
            breaker: BreakerGate::new(breaker, Arc::clone(&ctx.clock)),
            observed: ObservedLatency::default(),
            prefill: PrefillRate::default(),
            latency: ArcSwapOption::empty(),
            series: WorkerSeries::new(Arc::clone(&ctx.metrics), &spec.name),
            idle: Notify::new(),
            progress: Progress::new(Arc::clone(&ctx.clock)),
            filtered: watch::Sender::new(0),
        })
    }

    /// The spec this worker was registered with (models as discovered so far).
    pub fn spec(&self) -> WorkerSpec {
        WorkerSpec {
            name: self.name.to_string(),
            url: self.base_url.clone(),
            models: self.models().map(|m| m.as_ref().clone()),
            health_path: self.health_path.clone(),
            engine: self.engine,
        }
    }

    /// The worker's own health path, when its spec (or else its engine kind) overrides
    /// `health.path`.
    pub fn health_path(&self) -> Option<&str> {
        self.health_path
            .as_deref()
            .or_else(|| self.engine.map(EngineKind::health_path))
    }

    /// The engine the worker runs, when its spec names one.
    pub fn engine(&self) -> Option<EngineKind> {
        self.engine
    }

    /// The context length the worker's `/v1/models` states, once discovered.
    pub fn max_model_len(&self) -> Option<u64> {
        Some(self.max_model_len.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }

    pub(crate) fn set_max_model_len(&self, tokens: u64) {
        self.max_model_len.store(tokens, Ordering::Relaxed);
    }

    /// The engine's queue, running and KV-cache gauges from its last `/metrics` scrape.
    pub fn engine_load(&self) -> Option<EngineLoad> {
        self.engine_load.load().as_deref().copied()
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

    /// The absolute URI for `path` (which must start with `/`), for calls made with the
    /// shared client (health, metrics, discovery, warmup); requests use [`Self::target_for`].
    pub fn uri_for(&self, path: &str) -> Result<Uri, http::Error> {
        build_uri(&self.scheme, &self.authority, PathAndQuery::try_from(path)?)
    }

    /// The request target for `path` (which must start with `/`) on a request sent with
    /// [`Self::send`]: the path alone, as the connection already leads to this worker.
    pub fn target_for(&self, path: &str) -> Result<Uri, http::Error> {
        if let Some((_, uri)) = self
            .prebuilt_targets
            .iter()
            .find(|(known, _)| *known == path)
        {
            return Ok(uri.clone());
        }
        Ok(Uri::from(PathAndQuery::try_from(path)?))
    }

    /// Sends `request` to this worker on one of its idle keep-alive connections (a new one
    /// when none is idle) and returns the answer's head. Its URI is a [`Self::target_for`];
    /// a request without a `Host` header gets [`Self::host_header`].
    pub async fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        self.connections.send(request).await
    }

    /// The `Host` header for a request to this worker: its host, and its port unless that is
    /// the scheme's default (as the HTTP client writes it when the request carries none).
    pub fn host_header(&self) -> Option<&HeaderValue> {
        self.host_header.as_ref()
    }

    /// The worker's name as a header value (`None` if the name is not a valid one).
    pub fn name_header(&self) -> Option<&HeaderValue> {
        self.name_header.as_ref()
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
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Counts a request as in flight until the guard drops (response finished, failed or
    /// abandoned by the client).
    pub fn start_request(self: &Arc<Self>) -> InFlightGuard {
        if self.in_flight.fetch_add(1, Ordering::SeqCst) == 0 {
            self.progress.became_busy();
        }
        InFlightGuard {
            worker: Arc::clone(self),
            due_key: None,
            stream: None,
        }
    }

    /// Waits until no request is in flight; `false` if `timeout` passed first.
    pub(crate) async fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.idle.notified();
            tokio::pin!(notified);
            // Registered before the check, so a guard dropping in between still wakes us.
            notified.as_mut().enable();
            if self.in_flight() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.in_flight() == 0;
            }
        }
    }
}

/// The worker paths whose request targets each handle keeps ready: chat and completions,
/// where nearly every request goes.
const PREBUILT_PATHS: [&str; 2] = ["/v1/chat/completions", "/v1/completions"];

fn build_uri(
    scheme: &Scheme,
    authority: &Authority,
    path_and_query: PathAndQuery,
) -> Result<Uri, http::Error> {
    Uri::builder()
        .scheme(scheme.clone())
        .authority(authority.clone())
        .path_and_query(path_and_query)
        .build()
}

/// Decrements the worker's in-flight count on drop.
#[derive(Debug)]
pub struct InFlightGuard {
    pub(crate) worker: Arc<WorkerHandle>,
    /// Set when the request said when its bytes are due (hung detection, `progress.rs`).
    pub(crate) due_key: Option<(u64, u64)>,
    /// Set at a stream's first chunk: its key and last-chunk time (hung detection).
    pub(crate) stream: Option<(u64, Arc<AtomicU64>)>,
}

impl InFlightGuard {
    pub fn worker(&self) -> &Arc<WorkerHandle> {
        &self.worker
    }
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let worker = &self.worker;
        if let Some(key) = self.due_key.take() {
            worker.progress.forget(key);
        }
        if let Some((key, _)) = self.stream.take() {
            worker.progress.stream_ended(key);
        }
        // SeqCst pairs with `start_drain` + `wait_idle`: either this drop sees `draining`, or
        // the waiter sees the decremented count.
        let before = worker.in_flight.fetch_sub(1, Ordering::SeqCst);
        if before == 1 && worker.flags.draining.load(Ordering::SeqCst) {
            worker.idle.notify_waiters();
        }
    }
}

/// What the HTTP client puts in `Host` for `uri`: the host, with the port when it is not the
/// scheme's default.
fn host_header(uri: &Uri) -> Option<HeaderValue> {
    let host = uri.host()?;
    let secure = matches!(uri.scheme_str(), Some("https" | "wss"));
    match uri.port() {
        Some(port) if !matches!((port.as_u16(), secure), (443, true) | (80, false)) => {
            HeaderValue::from_str(&format!("{host}:{}", port.as_str())).ok()
        }
        _ => HeaderValue::from_str(host).ok(),
    }
}

impl WorkerHandle {
    /// The request path received bytes (headers or body) from this worker. Lock-free.
    pub fn note_progress(&self) {
        self.progress.byte();
    }

    /// How long this worker has sent nothing while a request on it is past due, if one is.
    pub fn silence(&self) -> Option<Duration> {
        self.progress.silence()
    }
}

impl InFlightGuard {
    /// This request's bytes are due `within` from now (zero for a stream, the expected
    /// generation time for a non-streaming answer); once past due, the worker's silence
    /// counts toward a hung verdict. A request that never says so never makes it hung.
    pub fn expect_bytes_within(&mut self, within: Duration) {
        if let Some(key) = self.due_key.take() {
            self.worker.progress.forget(key);
        }
        self.due_key = Some(self.worker.progress.expect(within));
    }

    /// A chunk of this stream's answer arrived (it counts as the worker's progress too).
    /// From its first chunk on, a stream that goes quiet counts toward a hung verdict on
    /// its own: lock-free after the first call.
    pub fn note_chunk(&mut self) {
        self.worker.progress.chunk(&mut self.stream);
    }

    /// This request's answer ended well: the worker is completing answers.
    pub fn note_completed(&self) {
        self.worker.progress.completed();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn test_context() -> HandleContext {
        let registry = prometheus::Registry::new();
        HandleContext {
            config: Arc::new(ConfigCell::new(crate::HealthConfig::default())),
            clock: Arc::new(switchyard_core::SystemClock),
            metrics: Arc::new(WorkerMetrics::register(&registry).unwrap()),
            upstream: test_upstream(),
        }
    }

    pub(crate) fn test_upstream() -> UpstreamConnector {
        crate::build_http_client(&crate::HttpClientConfig::default())
            .upstream()
            .clone()
    }

    fn handle(models: Option<Vec<String>>) -> Arc<WorkerHandle> {
        let spec = WorkerSpec {
            name: "a".into(),
            url: "http://127.0.0.1:9000/".into(),
            models,
            health_path: None,
            engine: None,
        };
        Arc::new(WorkerHandle::new(WorkerId(1), &spec, &test_context()).unwrap())
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

    #[tokio::test]
    async fn wait_idle_returns_when_the_last_guard_drops_or_times_out() {
        let w = handle(None);
        let guard = w.start_request();
        w.flags.draining.store(true, Ordering::SeqCst);
        let short = std::time::Duration::from_millis(20);
        assert!(!w.wait_idle(short).await, "still in flight");
        let waiter = {
            let w = Arc::clone(&w);
            tokio::spawn(async move { w.wait_idle(std::time::Duration::from_secs(10)).await })
        };
        tokio::task::yield_now().await;
        drop(guard);
        let idle = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(idle);
    }

    #[test]
    fn builds_upstream_uris() {
        let w = handle(None);
        assert_eq!(
            w.uri_for("/v1/models").unwrap().to_string(),
            "http://127.0.0.1:9000/v1/models"
        );
    }

    #[test]
    fn prebuilt_targets_equal_the_ones_built_per_call() {
        for url in ["http://127.0.0.1:9000/", "https://w1", "http://[::1]:8000"] {
            let spec = WorkerSpec {
                name: "a".into(),
                url: url.into(),
                models: None,
                health_path: None,
                engine: None,
            };
            let w = WorkerHandle::new(WorkerId(1), &spec, &test_context()).unwrap();
            assert_eq!(w.prebuilt_targets.len(), PREBUILT_PATHS.len());
            for path in PREBUILT_PATHS
                .iter()
                .chain(&["/v1/embeddings", "/v1/models?x=1"])
            {
                let built = build_uri(
                    &w.scheme,
                    &w.authority,
                    PathAndQuery::try_from(*path).unwrap(),
                )
                .unwrap();
                let uri = w.uri_for(path).unwrap();
                let target = w.target_for(path).unwrap();
                assert_eq!(target.path_and_query(), built.path_and_query());
                assert_eq!(target.scheme(), None);
                assert_eq!(target.authority(), None);
                assert_eq!(uri, built);
                assert_eq!(uri.to_string(), built.to_string());
                assert_eq!(uri.scheme(), built.scheme());
                assert_eq!(uri.authority(), built.authority());
                assert_eq!(uri.path_and_query(), built.path_and_query());
            }
        }
    }

    #[test]
    fn host_header_drops_only_the_default_port() {
        let host = |url: &str| host_header(&url.parse().unwrap()).unwrap();
        assert_eq!(host("http://127.0.0.1:8000"), "127.0.0.1:8000");
        assert_eq!(host("http://w1:80"), "w1");
        assert_eq!(host("http://w1:443"), "w1:443");
        assert_eq!(host("https://w1:443"), "w1");
        assert_eq!(host("https://w1:80"), "w1:80");
        assert_eq!(host("http://w1"), "w1");
        assert_eq!(host("http://[::1]:9000"), "[::1]:9000");
    }
}
