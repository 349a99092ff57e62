//! A fake Kubernetes API server for one namespace's pods: list, watch (a stream of events
//! after the watch opened), and compaction that answers old watches 410 Gone.

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use parking_lot::Mutex;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tokio::sync::broadcast;

/// The pods of one namespace, their resource versions, and the open watches.
#[derive(Default)]
pub struct Cluster {
    pub pods: BTreeMap<String, Value>,
    pub version: u64,
    /// Watches from a version below this answer 410 Gone.
    pub oldest_watchable: u64,
    pub selectors_seen: Vec<String>,
    pub tokens_seen: Vec<String>,
    pub lists: u64,
}

#[derive(Clone)]
pub struct FakeApi {
    pub cluster: Arc<Mutex<Cluster>>,
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
    pub fn new() -> Self {
        let (events, _) = broadcast::channel(1024);
        Self {
            cluster: Arc::new(Mutex::new(Cluster::default())),
            events,
        }
    }

    /// Changes a pod and tells the watches, unless `silently` (an event the watch missed).
    pub fn put(
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

    pub fn delete(&self, uid: &str, silently: bool) {
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
    pub fn expire(&self) {
        let mut cluster = self.cluster.lock();
        cluster.version += 1;
        cluster.oldest_watchable = cluster.version;
        let status = json!({"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}});
        let _ = self.events.send((cluster.version, status.to_string()));
    }

    pub fn lists(&self) -> u64 {
        self.cluster.lock().lists
    }

    pub(super) fn app(self) -> Router {
        Router::new()
            .route("/api/v1/namespaces/{ns}/pods", get(pods))
            .with_state(self)
    }

    pub async fn serve(self) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let app = self.app();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        url
    }

    /// Whether a watch is open: the server streams only events after one opens.
    pub fn watch_opened(&self) -> bool {
        let cluster = self.cluster.lock();
        cluster.selectors_seen.len() as u64 > cluster.lists
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
