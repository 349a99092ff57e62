#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The registry actor over real sockets: membership, observer calls, model discovery.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;
use switchyard_workers::{
    HealthConfig, HttpClientConfig, Registry, RegistryError, RegistryObserver, RegistryOptions,
    WorkerHandle, WorkerSpec, build_http_client,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[derive(Default)]
struct Recorder {
    events: Mutex<Vec<String>>,
}

impl RegistryObserver for Recorder {
    fn worker_added(&self, worker: &Arc<WorkerHandle>) {
        self.events.lock().push(format!("+{}", worker.name()));
    }
    fn worker_removed(&self, worker: &Arc<WorkerHandle>) {
        self.events.lock().push(format!("-{}", worker.name()));
    }
}

/// A minimal HTTP server answering every request with a fixed `/v1/models` body.
async fn models_server(model: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let _ = socket.read(&mut buf).await;
                let body = format!(r#"{{"object":"list","data":[{{"id":"{model}"}}]}}"#);
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
                    body.len(),
                    body
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (url, task)
}

fn spec(name: &str, url: &str) -> WorkerSpec {
    WorkerSpec {
        name: name.into(),
        url: url.into(),
        models: None,
        health_path: None,
        engine: None,
    }
}

fn options() -> RegistryOptions {
    RegistryOptions::new(HealthConfig::default(), &prometheus::Registry::new())
}

#[tokio::test]
async fn add_remove_publish_and_notify() {
    let recorder = Arc::new(Recorder::default());
    let client = build_http_client(&HttpClientConfig::default());
    let (registry, join) = Registry::start(client, recorder.clone(), options())
        .await
        .unwrap();

    let a = registry.add(spec("a", "http://127.0.0.1:1")).await.unwrap();
    let b = registry.add(spec("b", "http://127.0.0.1:2")).await.unwrap();
    assert_ne!(a.id(), b.id());
    assert_eq!(registry.directory().snapshot().len(), 2);

    let dup = registry.add(spec("a", "http://127.0.0.1:3")).await;
    assert!(matches!(dup, Err(RegistryError::AlreadyExists(_))));

    registry.remove("a").await.unwrap();
    assert!(registry.directory().find("a").is_none());
    assert!(matches!(
        registry.remove("a").await,
        Err(RegistryError::NotFound(_))
    ));
    // A re-added worker gets a fresh id, so stale routing entries can never alias it.
    let a2 = registry.add(spec("a", "http://127.0.0.1:1")).await.unwrap();
    assert!(a2.id() > b.id());
    assert_eq!(*recorder.events.lock(), vec!["+a", "+b", "-a", "+a"]);

    registry.stop();
    tokio::time::timeout(Duration::from_secs(5), join)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn worker_actor_discovers_models() {
    let (url, server) = models_server("llama-test").await;
    let client = build_http_client(&HttpClientConfig::default());
    let (registry, _join) = Registry::start(client, Arc::new(Recorder::default()), options())
        .await
        .unwrap();
    let worker = registry.add(spec("w", &url)).await.unwrap();
    let discovered = async {
        loop {
            if worker.models().is_some() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), discovered)
        .await
        .expect("models discovered");
    assert!(worker.serves("llama-test"));
    assert!(!worker.serves("other"));
    registry.stop();
    server.abort();
}
