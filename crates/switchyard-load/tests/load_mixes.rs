#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Runs with several targets, priority mixes, client retry groups and the timeline, against
//! the in-test mock target.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use support::{Behaviour, MockServer, SeenAttempt};
use switchyard_load::{
    LoadConfig, LoadReport, Workload, parse_client_retry_mix, parse_priority_mix, run,
};

fn base_config(target: String, rate: f64, duration: Duration) -> LoadConfig {
    let mut config = LoadConfig::new(target);
    config.rate = rate;
    config.duration = duration;
    config.request_timeout = Duration::from_secs(10);
    config.model = Some("mock-model".into());
    config.workload = Workload::Uniform;
    config
}

/// Attempts grouped by `x-request-id`, in arrival order.
fn by_request_id(attempts: &[SeenAttempt]) -> HashMap<String, Vec<SeenAttempt>> {
    let mut grouped: HashMap<String, Vec<SeenAttempt>> = HashMap::new();
    for attempt in attempts {
        let id = attempt
            .request_id
            .clone()
            .expect("retrying clients send x-request-id");
        grouped.entry(id).or_default().push(attempt.clone());
    }
    grouped
}

fn assert_timeline_adds_up(report: &LoadReport) {
    let timeline = report.timeline.as_ref().expect("timeline requested");
    let sum = |field: fn(&switchyard_load::TimelineSecond) -> u64| -> u64 {
        timeline.iter().map(field).sum()
    };
    assert_eq!(sum(|s| s.sent), report.total_attempts);
    assert_eq!(sum(|s| s.first_attempts), report.requests_sent);
    assert_eq!(sum(|s| s.retries), report.client_retries);
    let failed: u64 = timeline.iter().flat_map(|s| s.errors.values()).sum();
    assert_eq!(failed, report.attempt_errors.values().sum::<u64>());
    assert!(
        timeline
            .iter()
            .enumerate()
            .all(|(i, s)| s.second == i as u64)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_spread_over_every_target_reproducibly() {
    let first = MockServer::start(Behaviour::Serve { reject_every: 0 }).await;
    let second = MockServer::start(Behaviour::Serve { reject_every: 0 }).await;
    let run_once = || {
        let mut config = base_config(first.url(), 100.0, Duration::from_secs(1));
        config.extra_targets = vec![second.url()];
        run(config)
    };
    let report = run_once().await.unwrap();
    let (a, b) = (first.requests(), second.requests());
    assert_eq!(a + b, report.requests_sent);
    assert_eq!(report.targets[&first.url()].attempts, a);
    assert_eq!(report.targets[&second.url()].attempts, b);
    assert_eq!(report.targets[&second.url()].ok, b);
    // Binomial(n≈100, 0.5): each side far from empty.
    assert!(
        a * 4 > report.requests_sent && b * 4 > report.requests_sent,
        "{a} vs {b}"
    );

    let again = run_once().await.unwrap();
    assert_eq!(
        again.requests_sent, report.requests_sent,
        "same seed, same arrivals"
    );
    assert_eq!(first.requests() - a, a, "same seed, same target draws");
    first.stop().await;
    second.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_mix_sets_the_header_and_reports_each_class() {
    let server = MockServer::start(Behaviour::RefuseClass { class: "P2" }).await;
    let mut config = base_config(server.url(), 150.0, Duration::from_secs(1));
    config.priority_mix = Some(parse_priority_mix("P0=0.2,P1=0.5,P2=0.3").unwrap());
    let report = run(config).await.unwrap();

    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    for attempt in server.attempts() {
        *seen
            .entry(attempt.priority.expect("every request names a class"))
            .or_default() += 1;
    }
    let classes = &report.priority_classes;
    assert_eq!(classes.keys().collect::<Vec<_>>(), ["P0", "P1", "P2"]);
    for (class, slice) in classes {
        assert_eq!(slice.requests, seen[class], "{class}");
    }
    let total = report.requests_sent as f64;
    let share = |class: &str| classes[class].requests as f64 / total;
    assert!((share("P1") - 0.5).abs() < 0.15, "P1 share {}", share("P1"));
    assert_eq!(classes["P0"].success_rate, 1.0);
    assert_eq!(classes["P1"].success_rate, 1.0);
    assert_eq!(classes["P2"].ok, 0);
    assert_eq!(classes["P2"].errors["503"], classes["P2"].requests);
    assert!(classes["P0"].ttft.p99.is_some() && classes["P2"].ttft.p50.is_none());
    assert!(
        report.client_groups.is_empty(),
        "nobody retries without --client-retry"
    );
    assert!(server.attempts().iter().all(|a| a.request_id.is_none()));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_clients_retry_on_their_period_while_honouring_ones_wait_as_told() {
    // Retry-After 30 s: honouring clients are still waiting when the 1 s drain ends.
    let server = MockServer::start(Behaviour::RefuseFirst { retry_after: "30" }).await;
    let mut config = base_config(server.url(), 60.0, Duration::from_millis(600));
    config.request_timeout = Duration::from_secs(1);
    config.client_retry = Some(parse_client_retry_mix("honor:0.5,fixed100ms:0.5").unwrap());
    config.timeline = true;
    let report = run(config).await.unwrap();

    let fixed = &report.client_groups["fixed100ms"];
    let honour = &report.client_groups["honor"];
    assert!(fixed.requests > 0 && honour.requests > 0);
    assert_eq!(fixed.requests + honour.requests, report.requests_sent);
    assert_eq!(
        (fixed.ok, fixed.attempts),
        (fixed.requests, 2 * fixed.requests)
    );
    assert_eq!((honour.ok, honour.attempts), (0, honour.requests));
    assert_eq!(
        honour.errors["timeout"], honour.requests,
        "aborted while waiting"
    );
    assert_eq!(report.total_attempts, server.requests());
    assert_eq!(report.client_retries, fixed.requests);
    assert_eq!(report.attempt_errors["503"], report.requests_sent);
    assert_eq!(report.ok, fixed.requests);

    for attempts in by_request_id(&server.attempts()).values() {
        if let [refused, retried] = attempts.as_slice() {
            assert!(retried.at - refused.at >= Duration::from_millis(100));
            assert_eq!(
                retried.retry_count, None,
                "fixed clients do not count retries"
            );
        } else {
            assert_eq!(attempts.len(), 1, "honouring clients never retried");
        }
    }
    assert_timeline_adds_up(&report);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn honouring_clients_retry_after_the_advice_with_a_count_up_to_the_cap() {
    let server = MockServer::start(Behaviour::RefuseFirst { retry_after: "0.3" }).await;
    let mut config = base_config(server.url(), 40.0, Duration::from_millis(500));
    config.client_retry = Some(parse_client_retry_mix("honor:1").unwrap());
    let report = run(config).await.unwrap();
    assert_eq!(report.ok, report.requests_sent);
    assert_eq!(report.eventual_success_rate, 1.0);
    assert_eq!(report.total_attempts, 2 * report.requests_sent);
    assert!((report.client_retry_amplification - 2.0).abs() < 1e-12);
    for attempts in by_request_id(&server.attempts()).values() {
        let [refused, retried] = attempts.as_slice() else {
            panic!("expected two attempts, got {attempts:?}");
        };
        assert_eq!(refused.retry_count, None);
        assert_eq!(retried.retry_count.as_deref(), Some("1"));
        assert!(retried.at - refused.at >= Duration::from_millis(300));
    }
    server.stop().await;

    let server = MockServer::start(Behaviour::RefuseAll {
        retry_after: "0.05",
    })
    .await;
    let mut config = base_config(server.url(), 40.0, Duration::from_millis(300));
    config.client_retry = Some(parse_client_retry_mix("honor:1").unwrap());
    config.max_client_retries = 2;
    config.timeline = true;
    let report = run(config).await.unwrap();
    assert_eq!(report.ok, 0);
    assert_eq!(report.errors["503"], report.requests_sent);
    assert_eq!(report.total_attempts, 3 * report.requests_sent);
    for attempts in by_request_id(&server.attempts()).values() {
        let counts: Vec<Option<&str>> = attempts.iter().map(|a| a.retry_count.as_deref()).collect();
        assert_eq!(counts, [None, Some("1"), Some("2")]);
    }
    assert_timeline_adds_up(&report);
    let timeline = report.timeline.as_ref().unwrap();
    assert!(timeline.iter().all(|s| s.admitted == 0 && s.ok == 0));
    assert_eq!(report.settled_above(0.5, 0), None);
    server.stop().await;
}
