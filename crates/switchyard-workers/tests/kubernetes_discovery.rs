#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Kubernetes discovery against an in-process fake API server on loopback: list, watch events
//! (add, readiness changes, deletes), an expired resource version (410) that forces a re-list,
//! models from annotations or the pod's `/v1/models`, and the bearer token.

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

    async fn serve(self) -> String {
        let app = Router::new()
            .route("/api/v1/namespaces/{ns}/pods", get(pods))
            .with_state(self);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        url
    }
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

    // Watch: readiness arrives, a new pod appears, a pod goes away.
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

    // The pod now points at a live worker: its model is learned and it is registered.
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
