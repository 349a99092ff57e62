use super::*;
use crate::config::{ConfigCell, HealthConfig};
use crate::handle::HandleContext;
use crate::http_client::{HttpClientConfig, build_http_client};
use crate::metrics::WorkerMetrics;
use crate::spec::WorkerSpec;
use std::time::Duration;
use switchyard_core::{SystemClock, WorkerId};

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn killed_children_are_restarted_and_the_worker_keeps_its_state() {
    let mut config = HealthConfig::default();
    config.health.interval_ms = 20;
    config.health.suspect_interval_ms = 10;
    config.health.timeout_ms = 200;
    let ctx = HandleContext {
        config: Arc::new(ConfigCell::new(config)),
        clock: Arc::new(SystemClock),
        metrics: Arc::new(WorkerMetrics::register(&prometheus::Registry::new()).unwrap()),
        upstream: crate::handle::tests::test_upstream(),
    };
    // Port 1 refuses connections: every health check fails.
    let mut spec = WorkerSpec::parse_flag("w=http://127.0.0.1:1").unwrap();
    spec.models = Some(vec!["m".into()]);
    let handle = Arc::new(WorkerHandle::new(WorkerId(1), &spec, &ctx).unwrap());
    let args = SupervisorArgs {
        handle: Arc::clone(&handle),
        client: build_http_client(&HttpClientConfig::default()),
    };
    let (supervisor, join) = Actor::spawn(None, WorkerSupervisor, args).await.unwrap();
    wait_for("unhealthy", || !handle.is_healthy()).await;

    let before: Vec<ActorId> = supervisor
        .get_children()
        .iter()
        .map(|c| c.get_id())
        .collect();
    assert_eq!(
        before.len(),
        3,
        "health checker, collector and discovery (asking the configured worker's context \
         length); no prober"
    );
    for child in supervisor.get_children() {
        child.kill();
    }
    // Health checker and collector come back; discovery of a worker whose models are
    // configured does not (its context length is best effort).
    wait_for("two fresh children", || {
        let now = supervisor.get_children();
        now.len() == 2 && now.iter().all(|c| !before.contains(&c.get_id()))
    })
    .await;
    let failures = handle.status().counters.health_check_failures;
    wait_for("checks continue", || {
        handle.status().counters.health_check_failures > failures + 2
    })
    .await;
    // The streak state lives in the supervisor: still unhealthy, one transition in total.
    assert!(!handle.is_healthy());
    assert_eq!(handle.status().counters.transitions, 1);

    supervisor.stop(None);
    join.await.unwrap();
}
