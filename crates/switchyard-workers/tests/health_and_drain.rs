#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Health checks against the simulated worker over real sockets, and drain-before-remove.

mod common;

use common::raw_server::RawServer;
use common::{Fixture, eventually, fast_config, holds, sim};
use std::time::Duration;
use switchyard_sim::Fault;
use switchyard_workers::{DrainOutcome, Routability, WorkerState};
use tokio::time::Instant;

const LIMIT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_mode_goes_unhealthy_after_three_failures_and_back_after_five_successes() {
    let fx = Fixture::start(fast_config()).await;
    let worker = sim("sim-a").await;
    let w = fx.add("a", &worker.base_url()).await;
    eventually("first checks", LIMIT, || {
        w.status().counters.health_check_successes >= 2
    })
    .await;

    let failures_before = w.status().counters.health_check_failures;
    worker.set_fault(Fault::Error);
    let out = eventually("unhealthy", LIMIT, || {
        w.routability() == Routability::Unhealthy
    })
    .await;
    let status = w.status();
    assert!(status.counters.health_check_failures - failures_before >= 3);
    assert_eq!(status.state, WorkerState::Unhealthy);
    // Health takes it out of the candidate set, not out of the registry.
    assert!(fx.registry.directory().find("a").is_some());

    let successes_before = w.status().counters.health_check_successes;
    worker.set_fault(Fault::Ok);
    let back = eventually("healthy again", LIMIT, || {
        w.routability() == Routability::Routable
    })
    .await;
    let successes = w.status().counters.health_check_successes - successes_before;
    assert!(successes >= 5, "back after {successes} successes");
    assert_eq!(w.status().counters.transitions, 2);
    let text = fx.metrics_text();
    assert!(
        text.contains(r#"switchyard_worker_transitions_total{reason="unhealthy",worker="a"} 1"#)
    );
    assert!(text.contains(r#"switchyard_worker_state{state="healthy",worker="a"} 1"#));
    eprintln!("health path (interval 50 ms, suspect 20 ms): fault->out {out:?}, ok->back {back:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_leaves_routability_quickly_but_stays_registered() {
    let fx = Fixture::start(fast_config()).await;
    let worker = sim("sim-b").await;
    let w = fx.add("b", &worker.base_url()).await;
    eventually("first checks", LIMIT, || {
        w.status().counters.health_check_successes >= 2
    })
    .await;
    let killed = Instant::now();
    worker.shutdown().await;
    let shutdown_took = killed.elapsed();
    eventually("unhealthy", LIMIT, || {
        w.routability() == Routability::Unhealthy
    })
    .await;
    let out = killed.elapsed();
    // One 50 ms interval to notice, two 20 ms suspect re-checks to confirm, plus scheduling.
    assert!(out < Duration::from_millis(1000), "took {out:?}");
    assert!(fx.registry.directory().find("b").is_some());
    assert_eq!(fx.registry.snapshot()[0].state, WorkerState::Unhealthy);
    eprintln!(
        "killed worker: out of routability after {out:?} (shutdown itself {shutdown_took:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_waits_for_in_flight_requests_then_removes() {
    let fx = Fixture::start(fast_config()).await;
    let server = RawServer::start().await;
    let w = fx.add("a", &server.url).await;
    let g1 = w.start_request();
    let g2 = w.start_request();

    let drain = fx.registry.drain("a").await.unwrap();
    assert_eq!(w.routability(), Routability::Draining);
    assert_eq!(fx.registry.snapshot()[0].state, WorkerState::Draining);
    let joined = fx.registry.drain("a").await.unwrap();
    assert!(std::sync::Arc::ptr_eq(joined.worker(), &w));

    holds(
        "registered while two are in flight",
        Duration::from_millis(200),
        || fx.registry.directory().find("a").is_some(),
    )
    .await;
    drop(g1);
    holds(
        "registered while one is in flight",
        Duration::from_millis(100),
        || fx.registry.directory().find("a").is_some(),
    )
    .await;
    let released = Instant::now();
    drop(g2);
    let outcome = tokio::time::timeout(LIMIT, drain.finished()).await.unwrap();
    assert_eq!(outcome, DrainOutcome::Idle);
    assert_eq!(joined.finished().await, DrainOutcome::Idle);
    eprintln!(
        "drain: removed {:?} after the last request ended",
        released.elapsed()
    );
    assert!(fx.registry.directory().find("a").is_none());
    assert_eq!(*fx.recorder.events.lock(), vec!["+a", "-a"]);
    assert!(
        !fx.metrics_text().contains(r#"worker="a""#),
        "series removed"
    );
    assert!(matches!(
        fx.registry.drain("a").await,
        Err(switchyard_workers::RegistryError::NotFound(_))
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_gives_up_after_its_timeout() {
    let mut config = fast_config();
    config.drain.timeout_ms = 150;
    let fx = Fixture::start(config).await;
    let server = RawServer::start().await;
    let w = fx.add("a", &server.url).await;
    let stuck = w.start_request();
    let started = Instant::now();
    let drain = fx.registry.drain("a").await.unwrap();
    let outcome = tokio::time::timeout(LIMIT, drain.finished()).await.unwrap();
    assert_eq!(outcome, DrainOutcome::TimedOut { in_flight: 1 });
    assert!(started.elapsed() >= Duration::from_millis(150));
    assert!(fx.registry.directory().find("a").is_none());
    assert!(
        fx.metrics_text()
            .contains(r#"switchyard_worker_drains_total{outcome="timed_out"} 1"#)
    );
    // The request still running keeps its handle and ends on its own.
    assert_eq!(stuck.worker().in_flight(), 1);
    drop(stuck);
    assert_eq!(w.in_flight(), 0);
}
