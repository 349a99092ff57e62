#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end runs of the load tool against the in-test mock target.

mod support;

use std::time::Duration;

use support::{Behaviour, CACHED_TOKENS, MockServer, PROMPT_TOKENS, WORKERS};
use switchyard_load::{
    LoadArgs, LoadConfig, LoadError, LoadReport, Workload, coefficient_of_variation, run, run_cli,
};

fn config(server: &MockServer, rate: f64, duration: Duration) -> LoadConfig {
    let mut config = LoadConfig::new(server.url());
    config.rate = rate;
    config.duration = duration;
    config.request_timeout = Duration::from_secs(10);
    config
}

fn assert_hit_rate_is_mock_ratio(report: &LoadReport) {
    assert_eq!(report.prompt_tokens, PROMPT_TOKENS * report.ok);
    assert_eq!(report.cached_tokens, CACHED_TOKENS * report.ok);
    let expected = CACHED_TOKENS as f64 / PROMPT_TOKENS as f64;
    assert!((report.hit_rate() - expected).abs() < 1e-12);
    assert_eq!(report.physical_hit_rate, report.hit_rate());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_run_counts_outcomes_workers_and_hit_rate() {
    let server = MockServer::start(Behaviour::Serve { reject_every: 5 }).await;
    let mut config = config(&server, 100.0, Duration::from_secs(2));
    config.headers = vec![("authorization".into(), "Bearer test-key".into())];
    let report = run(config).await.unwrap();

    // Poisson arrivals at 100/s for 2 s: mean 200, stddev ≈ 14.
    assert!(
        (137..=263).contains(&report.requests_sent),
        "sent {}",
        report.requests_sent
    );
    assert_eq!(
        report.model, "mock-model",
        "model discovered via /v1/models"
    );
    assert_eq!(report.requests_sent, server.requests());
    assert_eq!(report.ok, server.served());
    assert_eq!(report.errors.get("503").copied(), Some(server.rejected()));
    assert_eq!(report.error_count(), server.rejected());
    assert_eq!(report.ok + report.error_count(), report.requests_sent);
    assert_eq!(report.client_dropped, 0);
    assert!((report.achieved_rate - report.requests_sent as f64 / report.issue_secs).abs() < 1e-9);

    let names: Vec<&str> = report.workers.keys().map(String::as_str).collect();
    assert_eq!(names, WORKERS);
    let counts: Vec<u64> = report.workers.values().map(|load| load.requests).collect();
    assert!(
        counts[0].abs_diff(counts[1]) <= 1,
        "alternating workers: {counts:?}"
    );
    assert_eq!(counts.iter().sum::<u64>(), report.ok);
    assert!((report.workers["worker-a"].share - 0.5).abs() < 0.01);
    assert!((report.load_cv() - coefficient_of_variation(&counts)).abs() < 1e-12);
    assert!(report.load_cv() < 0.02);
    assert_eq!(report.worker_load_cv, report.load_cv());

    assert_hit_rate_is_mock_ratio(&report);
    assert_eq!(report.ttft.samples as u64, report.ok);
    assert_eq!(report.e2e.samples as u64, report.ok);
    let (ttft, e2e) = (report.ttft.p50.unwrap(), report.e2e.p50.unwrap());
    assert!(ttft > 0.0 && ttft <= e2e, "ttft {ttft} e2e {e2e}");
    assert!(report.ttft.p50 <= report.ttft.p90 && report.ttft.p90 <= report.ttft.p99);

    assert_eq!(
        server
            .authorization_values()
            .into_iter()
            .collect::<Vec<_>>(),
        ["Bearer test-key"]
    );
    let sessions = server.session_ids();
    assert!(!sessions.is_empty() && sessions.iter().all(|id| id.starts_with('s')));
    server.stop().await;
}

#[tokio::test]
async fn non_streaming_run_reads_json_answers() {
    let server = MockServer::start(Behaviour::Serve { reject_every: 0 }).await;
    let mut config = config(&server, 40.0, Duration::from_millis(500));
    config.stream = false;
    config.workload = Workload::Uniform;
    config.model = Some("mock-model".into());
    let report = run(config).await.unwrap();

    assert!(report.requests_sent > 0);
    assert_eq!(report.ok, report.requests_sent);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert_hit_rate_is_mock_ratio(&report);
    assert_eq!(
        report.ttft.p50, report.e2e.p50,
        "TTFT is e2e without streaming"
    );
    assert_eq!(report.workers.len(), 2);
    server.stop().await;
}

#[tokio::test]
async fn hanging_target_requests_are_counted_as_timeouts() {
    let server = MockServer::start(Behaviour::Hang).await;
    let mut config = config(&server, 40.0, Duration::from_millis(500));
    config.model = Some("mock-model".into());
    config.workload = Workload::Hotkey;
    config.request_timeout = Duration::from_millis(200);
    let report = run(config).await.unwrap();

    assert!(report.requests_sent > 0);
    assert_eq!(report.ok, 0);
    assert_eq!(
        report.errors.get("timeout").copied(),
        Some(report.requests_sent)
    );
    assert_eq!(report.errors.len(), 1);
    assert!(report.workers.is_empty());
    assert_eq!(report.ttft.p50, None);
    server.stop().await;
}

#[tokio::test]
async fn arrivals_beyond_max_in_flight_are_dropped_not_queued() {
    let server = MockServer::start(Behaviour::Hang).await;
    let mut config = config(&server, 80.0, Duration::from_millis(500));
    config.model = Some("mock-model".into());
    config.max_in_flight = 2;
    // Longer than the issuing window, so no slot frees up while arrivals are still coming.
    config.request_timeout = Duration::from_secs(1);
    let report = run(config).await.unwrap();

    // Nothing finishes before the drain, so exactly the first two arrivals are sent.
    assert_eq!(report.requests_sent, 2);
    assert!(
        report.client_dropped > 5,
        "dropped {}",
        report.client_dropped
    );
    assert_eq!(server.hanging_peak(), 2);
    assert_eq!(report.errors.get("timeout").copied(), Some(2));
    server.stop().await;
}

async fn closed_port_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("http://{addr}")
}

#[tokio::test]
async fn refused_connections_are_counted_as_connect_errors() {
    let mut config = LoadConfig::new(closed_port_url().await);
    config.rate = 40.0;
    config.duration = Duration::from_millis(300);
    config.model = Some("m".into());
    config.request_timeout = Duration::from_secs(5);
    let report = run(config).await.unwrap();

    assert!(report.requests_sent > 0);
    assert_eq!(
        report.errors.get("connect").copied(),
        Some(report.requests_sent)
    );
}

#[tokio::test]
async fn model_discovery_failure_is_an_error() {
    let mut config = LoadConfig::new(closed_port_url().await);
    config.request_timeout = Duration::from_secs(5);
    let result = run(config).await;
    assert!(
        matches!(result, Err(LoadError::ModelDiscovery { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn run_cli_writes_the_json_report() {
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }

    let server = MockServer::start(Behaviour::Serve { reject_every: 3 }).await;
    let path = std::env::temp_dir().join(format!("switchyard-load-{}.json", std::process::id()));
    let url = server.url();
    let path_arg = path.to_string_lossy().into_owned();
    let argv = [
        "load",
        "--target",
        &url,
        "--rate",
        "30",
        "--duration",
        "0.5",
        "--workload",
        "uniform",
        "--quiet",
        "--json",
        &path_arg,
        "--api-key",
        "k1",
    ];
    let args = Cli::try_parse_from(argv).unwrap().load;
    let report = run_cli(args).await.unwrap();

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(json["requests_sent"], report.requests_sent);
    assert_eq!(json["workload"], "uniform");
    assert_eq!(
        json["errors"]["503"].as_u64(),
        report.errors.get("503").copied()
    );
    assert!(json["physical_hit_rate"].as_f64().is_some());
    assert!(server.authorization_values().contains("Bearer k1"));
    server.stop().await;
}
