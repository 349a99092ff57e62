#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Kubernetes discovery against an in-process fake API server on loopback: list, watch events
//! (add, readiness changes, deletes), an expired resource version (410) that forces a re-list,
//! models from annotations or the pod's `/v1/models`, the bearer token, and the API server
//! reached over HTTPS with the cluster CA (an untrusted certificate is refused).

mod common;

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use common::*;
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use switchyard_sim::{SimConfig, SimWorker};
use switchyard_workers::discovery::{DiscoveryConfig, spawn};
use tokio::sync::broadcast;

/// The pods of one namespace, their resource versions, and the open watches.
#[derive(Default)]
struct Cluster {
    pods: BTreeMap<String, Value>,
    version: u64,
    /// Watches from a version below this answer 410 Gone.
    oldest_watchable: u64,
    selectors_seen: Vec<String>,
    tokens_seen: Vec<String>,
    lists: u64,
}

#[derive(Clone)]
struct FakeApi {
    cluster: Arc<Mutex<Cluster>>,
    events: broadcast::Sender<(u64, String)>,
}

fn pod_json(uid: &str, name: &str, port: u16, ready: bool, model: Option<&str>, rv: u64) -> Value {
    let mut annotations = json!({"switchyard.io/port": port.to_string()});
    if let Some(model) = model {
        annotations["switchyard.io/models"] = json!(model);
    }
    json!({
        "metadata": {"uid": uid, "name": name, "resourceVersion": rv.to_string(),
                     "labels": {"app": "sim"}, "annotations": annotations},
        "status": {"podIP": "127.0.0.1",
                   "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
    })
}

impl FakeApi {
    fn new() -> Self {
        let (events, _) = broadcast::channel(1024);
        Self {
            cluster: Arc::new(Mutex::new(Cluster::default())),
            events,
        }
    }

    /// Changes a pod and tells the watches, unless `silently` (an event the watch missed).
    fn put(
        &self,
        uid: &str,
        name: &str,
        port: u16,
        ready: bool,
        model: Option<&str>,
        silently: bool,
    ) {
        let mut cluster = self.cluster.lock();
        cluster.version += 1;
        let rv = cluster.version;
        let kind = if cluster.pods.contains_key(uid) {
            "MODIFIED"
        } else {
            "ADDED"
        };
        let pod = pod_json(uid, name, port, ready, model, rv);
        cluster.pods.insert(uid.to_string(), pod.clone());
        if !silently {
            let _ = self
                .events
                .send((rv, json!({"type": kind, "object": pod}).to_string()));
        }
    }

    fn delete(&self, uid: &str, silently: bool) {
        let mut cluster = self.cluster.lock();
        cluster.version += 1;
        let rv = cluster.version;
        if let Some(mut pod) = cluster.pods.remove(uid) {
            pod["metadata"]["resourceVersion"] = json!(rv.to_string());
            if !silently {
                let _ = self
                    .events
                    .send((rv, json!({"type": "DELETED", "object": pod}).to_string()));
            }
        }
    }

    /// Compaction: every open watch gets an ERROR 410 and no older version can be watched.
    fn expire(&self) {
        let mut cluster = self.cluster.lock();
        cluster.version += 1;
        cluster.oldest_watchable = cluster.version;
        let status = json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}});
        let _ = self.events.send((cluster.version, status.to_string()));
    }

    fn lists(&self) -> u64 {
        self.cluster.lock().lists
    }

    fn app(self) -> Router {
        Router::new()
            .route("/api/v1/namespaces/{ns}/pods", get(pods))
            .with_state(self)
    }

    async fn serve(self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = self.app();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        url
    }

    /// The same API over HTTPS with the certificate and key in `dir` (`server.pem`,
    /// `server-key.pem`); counts the handshakes that failed.
    async fn serve_tls(self, dir: &std::path::Path) -> (String, Arc<AtomicU64>) {
        let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", tcp.local_addr().unwrap());
        let failed = Arc::new(AtomicU64::new(0));
        let listener = TlsListener {
            tcp,
            acceptor: tls_acceptor(dir),
            failed: failed.clone(),
        };
        let app = self.app();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (url, failed)
    }
}

fn tls_acceptor(dir: &std::path::Path) -> tokio_rustls::TlsAcceptor {
    use rustls_pki_types::pem::PemObject;
    let certs = rustls_pki_types::CertificateDer::pem_file_iter(dir.join("server.pem"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(dir.join("server-key.pem")).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(Arc::new(config))
}

/// Accepts TCP connections and completes their TLS handshake before axum sees them.
struct TlsListener {
    tcp: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    failed: Arc<AtomicU64>,
}

impl axum::serve::Listener for TlsListener {
    type Io = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                continue;
            };
            match self.acceptor.accept(stream).await {
                Ok(tls) => return (tls, addr),
                Err(_) => {
                    self.failed.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}

/// A throwaway CA and a certificate for 127.0.0.1 signed by it.
fn make_local_ca(dir: &std::path::Path) {
    let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/tls/make-local-ca.sh");
    let status = std::process::Command::new("bash")
        .arg(script)
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run make-local-ca.sh (needs openssl)");
    assert!(status.success());
}

async fn pods(
    State(api): State<FakeApi>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let mut cluster = api.cluster.lock();
    cluster
        .selectors_seen
        .push(query.get("labelSelector").cloned().unwrap_or_default());
    if let Some(auth) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        cluster.tokens_seen.push(auth.to_string());
    }
    if query.get("watch").map(String::as_str) != Some("true") {
        cluster.lists += 1;
        let items: Vec<Value> = cluster.pods.values().cloned().collect();
        return axum::Json(json!({"kind": "PodList", "metadata": {"resourceVersion": cluster.version.to_string()}, "items": items})).into_response();
    }
    let from: u64 = query
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    if from < cluster.oldest_watchable {
        return (
            StatusCode::GONE,
            axum::Json(json!({"kind": "Status", "code": 410})),
        )
            .into_response();
    }
    let receiver = api.events.subscribe();
    drop(cluster);
    let stream = futures_util::stream::unfold(receiver, move |mut receiver| async move {
        loop {
            match receiver.recv().await {
                Ok((rv, line)) if rv > from => {
                    return Some((Ok::<_, std::io::Error>(format!("{line}\n")), receiver));
                }
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
    });
    Body::from_stream(stream).into_response()
}

async fn sims(count: usize) -> Vec<SimWorker> {
    let mut sims = Vec::new();
    for i in 0..count {
        let config = SimConfig {
            name: format!("sim-{i}"),
            model: format!("model-{i}"),
            time_scale: 0.05,
            ..SimConfig::default()
        };
        sims.push(
            SimWorker::start(config, "127.0.0.1:0".parse().unwrap())
                .await
                .unwrap(),
        );
    }
    sims
}

/// Registered workers not draining: what routing can choose from.
fn registered(fixture: &Fixture) -> BTreeMap<String, (String, Option<Vec<String>>)> {
    fixture
        .registry
        .snapshot()
        .into_iter()
        .filter(|w| !w.draining)
        .map(|w| (w.name, (w.url, w.models)))
        .collect()
}

fn config(api_server: String, bearer_file: String) -> DiscoveryConfig {
    DiscoveryConfig {
        enabled: true,
        api_server,
        namespace: "inference".into(),
        label_selector: "app=sim,tier in (a,b)".into(),
        bearer_file,
        resync_interval_ms: 60_000,
        retry_interval_ms: 100,
        ..DiscoveryConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_listed_watched_deleted_and_relisted_after_expiry() {
    let sims = sims(4).await;
    let port = |i: usize| sims[i].local_addr().port();
    let api = FakeApi::new();
    // Before discovery starts: a ready pod with a declared model, one whose model must be
    // asked from the pod itself, and one not ready yet.
    api.put("uid-0", "sim-0", port(0), true, Some("model-0"), false);
    api.put("uid-1", "sim-1", port(1), true, None, false);
    api.put("uid-2", "sim-2", port(2), false, Some("model-2"), false);
    let url = api.clone().serve().await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "sa-token-1\n").unwrap();

    let fixture = Fixture::start(fast_config()).await;
    let metrics = prometheus::Registry::new();
    let discovery = spawn(
        fixture.registry.clone(),
        fixture.client.clone(),
        config(url, token.display().to_string()),
        &metrics,
    )
    .unwrap();

    let expect =
        |pairs: &[(&str, usize, &str)]| -> BTreeMap<String, (String, Option<Vec<String>>)> {
            pairs
                .iter()
                .map(|(name, i, model)| {
                    (
                        name.to_string(),
                        (
                            format!("http://127.0.0.1:{}", port(*i)),
                            Some(vec![model.to_string()]),
                        ),
                    )
                })
                .collect()
        };
    eventually(
        "the listed pods registered",
        Duration::from_secs(10),
        || registered(&fixture) == expect(&[("sim-0", 0, "model-0"), ("sim-1", 1, "model-1")]),
    )
    .await;
    {
        let cluster = api.cluster.lock();
        assert_eq!(cluster.selectors_seen[0], "app=sim,tier in (a,b)");
        assert!(
            cluster.tokens_seen.iter().all(|t| t == "Bearer sa-token-1"),
            "{:?}",
            cluster.tokens_seen
        );
    }

    // Watch: readiness arrives, a new pod appears, a pod goes away. (The fake server streams
    // only events after a watch opens, so wait for it.)
    eventually("a watch opened", Duration::from_secs(10), || {
        let cluster = api.cluster.lock();
        cluster.selectors_seen.len() as u64 > cluster.lists
    })
    .await;
    api.put("uid-2", "sim-2", port(2), true, Some("model-2"), false);
    api.put("uid-3", "sim-3", port(3), true, Some("model-3"), false);
    api.delete("uid-0", false);
    eventually("watch events applied", Duration::from_secs(10), || {
        registered(&fixture)
            == expect(&[
                ("sim-1", 1, "model-1"),
                ("sim-2", 2, "model-2"),
                ("sim-3", 3, "model-3"),
            ])
    })
    .await;
    // A pod turning not-ready leaves routing.
    api.put("uid-3", "sim-3", port(3), false, Some("model-3"), false);
    eventually("the not-ready pod drained", Duration::from_secs(10), || {
        registered(&fixture) == expect(&[("sim-1", 1, "model-1"), ("sim-2", 2, "model-2")])
    })
    .await;

    // Events missed while the watch's version expired: only a re-list can see them.
    let lists_before = api.lists();
    api.delete("uid-1", true);
    api.put("uid-0b", "sim-0", port(0), true, Some("model-0"), true);
    api.expire();
    eventually(
        "the re-list after expiry applied",
        Duration::from_secs(10),
        || registered(&fixture) == expect(&[("sim-0", 0, "model-0"), ("sim-2", 2, "model-2")]),
    )
    .await;
    assert!(
        api.lists() > lists_before,
        "the expired watch did not cause a re-list"
    );
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&metrics.gather())
        .unwrap();
    assert!(
        text.contains(r#"switchyard_discovery_lists_total{reason="expired"}"#),
        "{text}"
    );
    discovery.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_whose_model_cannot_be_learned_is_never_registered_until_it_can() {
    let sims = sims(1).await;
    let api = FakeApi::new();
    // Nothing listens on this port: the model cannot be asked, and none is declared.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    api.put("uid-x", "mystery", closed, true, None, false);
    let url = api.clone().serve().await;
    let fixture = Fixture::start(fast_config()).await;
    let metrics = prometheus::Registry::new();
    let _discovery = spawn(
        fixture.registry.clone(),
        fixture.client.clone(),
        config(url, String::new()),
        &metrics,
    )
    .unwrap();

    eventually("the pod was not held back", Duration::from_secs(10), || {
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&metrics.gather())
            .unwrap();
        text.contains("switchyard_discovery_pending_workers 1")
    })
    .await;
    assert!(
        fixture.registry.specs().is_empty(),
        "registered before its model was known"
    );
    assert!(
        api.cluster.lock().tokens_seen.is_empty(),
        "no token configured, none sent"
    );

    // The pod now points at a live worker: its model is learned and it is registered (once
    // the watch is open: the fake server streams only later events).
    eventually("a watch opened", Duration::from_secs(10), || {
        let cluster = api.cluster.lock();
        cluster.selectors_seen.len() as u64 > cluster.lists
    })
    .await;
    api.put(
        "uid-x",
        "mystery",
        sims[0].local_addr().port(),
        true,
        None,
        false,
    );
    eventually(
        "the model learned and the pod registered",
        Duration::from_secs(10),
        || {
            fixture
                .registry
                .specs()
                .iter()
                .any(|s| s.name == "mystery" && s.models == Some(vec!["model-0".to_string()]))
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_is_reached_over_https_with_the_cluster_ca_and_token() {
    let sims = sims(1).await;
    let api = FakeApi::new();
    api.put(
        "uid-0",
        "sim-0",
        sims[0].local_addr().port(),
        true,
        Some("model-0"),
        false,
    );
    let trusted = tempfile::tempdir().unwrap();
    make_local_ca(trusted.path());
    let (url, failed_handshakes) = api.clone().serve_tls(trusted.path()).await;
    let token = trusted.path().join("token");
    std::fs::write(&token, "sa-token-tls\n").unwrap();

    // A CA that did not sign the server's certificate: nothing is listed, nothing registered.
    let other = tempfile::tempdir().unwrap();
    make_local_ca(other.path());
    let fixture = Fixture::start(fast_config()).await;
    let mut untrusted = config(url.clone(), token.display().to_string());
    untrusted.ca_file = other.path().join("ca.pem").display().to_string();
    let metrics = prometheus::Registry::new();
    let refused = spawn(
        fixture.registry.clone(),
        fixture.client.clone(),
        untrusted,
        &metrics,
    )
    .unwrap();
    eventually(
        "the untrusted server refused twice",
        Duration::from_secs(10),
        || failed_handshakes.load(Ordering::SeqCst) >= 2,
    )
    .await;
    refused.stop();
    assert!(fixture.registry.specs().is_empty());
    assert_eq!(api.lists(), 0, "a request reached the untrusted server");
    let text = prometheus::TextEncoder::new()
        .encode_to_string(&metrics.gather())
        .unwrap();
    assert!(
        text.contains(r#"switchyard_discovery_lists_total{reason="error"}"#),
        "{text}"
    );

    // A CA file that holds no certificate is a start-up error naming the field.
    let empty = trusted.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let mut broken = config(url.clone(), String::new());
    broken.ca_file = empty.display().to_string();
    let error = spawn(
        fixture.registry.clone(),
        fixture.client.clone(),
        broken,
        &prometheus::Registry::new(),
    )
    .err()
    .expect("an empty CA bundle is refused");
    assert!(error.to_string().contains("discovery.ca_file"), "{error}");

    // The cluster CA: listed, watched and authenticated with the service account's token.
    let mut in_cluster = config(url, token.display().to_string());
    in_cluster.ca_file = trusted.path().join("ca.pem").display().to_string();
    let discovery = spawn(
        fixture.registry.clone(),
        fixture.client.clone(),
        in_cluster,
        &prometheus::Registry::new(),
    )
    .unwrap();
    let url_of = |i: usize| format!("http://127.0.0.1:{}", sims[i].local_addr().port());
    eventually("the listed pod registered", Duration::from_secs(10), || {
        registered(&fixture).get("sim-0") == Some(&(url_of(0), Some(vec!["model-0".into()])))
    })
    .await;
    // A watch event over the TLS stream: the pod goes away (once the watch is open: the fake
    // server only streams events that happen after it).
    eventually("a watch opened", Duration::from_secs(10), || {
        let cluster = api.cluster.lock();
        cluster.selectors_seen.len() as u64 > cluster.lists
    })
    .await;
    api.delete("uid-0", false);
    eventually("the deleted pod drained", Duration::from_secs(10), || {
        registered(&fixture).is_empty()
    })
    .await;
    let cluster = api.cluster.lock();
    assert!(cluster.lists >= 1);
    assert!(
        !cluster.tokens_seen.is_empty()
            && cluster
                .tokens_seen
                .iter()
                .all(|t| t == "Bearer sa-token-tls"),
        "{:?}",
        cluster.tokens_seen
    );
    drop(cluster);
    discovery.stop();
}
