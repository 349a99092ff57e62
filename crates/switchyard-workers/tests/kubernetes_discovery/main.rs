#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Kubernetes discovery against an in-process fake API server on loopback: list, watch events
//! (add, readiness changes, deletes), an expired resource version (410) that forces a re-list,
//! models from annotations or the pod's `/v1/models`, the bearer token, and the API server
//! reached over HTTPS with the cluster CA (an untrusted certificate is refused).

#[path = "../common/mod.rs"]
mod common;
mod fake_api;
mod https;

use common::*;
use fake_api::FakeApi;
use https::make_local_ca;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::Duration;
use switchyard_sim::{SimConfig, SimWorker};
use switchyard_workers::discovery::{DiscoveryConfig, spawn};

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

fn exposition(metrics: &prometheus::Registry) -> String {
    prometheus::TextEncoder::new()
        .encode_to_string(&metrics.gather())
        .unwrap()
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
        api.watch_opened()
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
    let text = exposition(&metrics);
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
        let text = exposition(&metrics);
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
        api.watch_opened()
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
    let text = exposition(&metrics);
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
        api.watch_opened()
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
