//! Collector unit tests: single attempts, retries across slices, aborted requests.

use http::StatusCode;

use super::*;
use crate::exchange::Completion;

fn completion(worker: Option<&str>, prompt: u64, cached: u64, millis: u64) -> Outcome {
    Ok(Completion {
        ttft: Some(Duration::from_millis(millis)),
        e2e: Duration::from_millis(millis * 2),
        prompt_tokens: prompt,
        cached_tokens: cached,
        worker: worker.map(str::to_owned),
        ..Completion::default()
    })
}

fn refused() -> Outcome {
    Err(Failure::status(
        StatusCode::SERVICE_UNAVAILABLE,
        Some(Duration::from_secs(1)),
    ))
}

#[test]
fn collector_turns_outcomes_into_a_report() {
    let mut collector = Collector::default();
    collector.record_dropped();
    collector.record(&completion(Some("a"), 100, 50, 10));
    collector.record(&completion(Some("a"), 100, 0, 20));
    collector.record(&completion(Some("b"), 200, 150, 30));
    collector.record(&completion(None, 0, 0, 40));
    collector.record(&Err(Failure::new("503")));
    collector.record(&Err(Failure::new("timeout")));
    let report = collector.finish(RunFacts::for_tests());

    assert_eq!(report.requests_sent, 6);
    assert_eq!((report.total_attempts, report.client_retries), (6, 0));
    assert_eq!(report.client_retry_amplification, 1.0);
    assert_eq!(report.ok, 4);
    assert_eq!(report.error_count(), 2);
    assert_eq!(report.errors["503"], 1);
    assert_eq!(report.attempt_errors, report.errors);
    assert_eq!(report.client_dropped, 1);
    assert!((report.achieved_rate - 3.0).abs() < 1e-12);
    // (50 + 0 + 150) / (100 + 100 + 200)
    assert!((report.hit_rate() - 0.5).abs() < 1e-12);
    assert_eq!(report.physical_hit_rate, report.hit_rate());
    assert_eq!(report.workers["a"].requests, 2);
    assert!((report.workers["b"].share - 0.25).abs() < 1e-12);
    assert_eq!(report.workers[UNKNOWN_WORKER].requests, 1);
    // counts 2, 1, 1: mean 4/3, population stddev sqrt(2)/3 → cv sqrt(2)/4
    assert!((report.load_cv() - 2.0_f64.sqrt() / 4.0).abs() < 1e-12);
    assert_eq!(report.ttft.p50, Some(0.02));
    assert_eq!(report.ttft.p99, Some(0.04));
    assert_eq!(report.e2e.p90, Some(0.08));
    assert_eq!(report.e2e.max, Some(0.08), "the slowest answer");
    assert_eq!(
        report.targets["http://t"],
        TargetLoad { attempts: 6, ok: 4 }
    );
    assert!(report.priority_classes.is_empty() && report.client_groups.is_empty());
    assert!(report.timeline.is_none());
}

#[test]
fn retries_count_as_attempts_and_slices_see_final_outcomes() {
    let mut collector = Collector::new(true);
    let honour = ClientRetryMode::HonourRetryAfter;
    let labels = |priority, target| RequestLabels {
        target,
        priority: Some(priority),
        client_group: Some(honour),
    };
    // P0 on target 1: refused, then served on the retry a second later.
    let first = collector.begin(labels(PriorityClass::P0, 1));
    collector.attempt_started(first, Duration::from_millis(200), false);
    collector.attempt_finished(first, Duration::from_millis(200), &refused());
    collector.attempt_started(first, Duration::from_millis(1_300), true);
    let served = completion(Some("w"), 10, 5, 30);
    collector.attempt_finished(first, Duration::from_millis(1_300), &served);
    collector.finish_request(first, &served);
    // P2 on target 0: refused and given up.
    let second = collector.begin(labels(PriorityClass::P2, 0));
    collector.attempt_started(second, Duration::from_millis(400), false);
    collector.attempt_finished(second, Duration::from_millis(400), &refused());
    collector.finish_request(second, &refused());
    // P2 still waiting for its retry when the run ends.
    let third = collector.begin(labels(PriorityClass::P2, 0));
    collector.attempt_started(third, Duration::from_millis(600), false);
    collector.attempt_finished(third, Duration::from_millis(600), &refused());
    let mut facts = RunFacts::for_tests();
    facts.targets = vec!["http://a".into(), "http://b".into()];
    let report = collector.finish(facts);

    assert_eq!((report.requests_sent, report.total_attempts), (3, 4));
    assert_eq!(report.client_retries, 1);
    assert!((report.client_retry_amplification - 4.0 / 3.0).abs() < 1e-12);
    assert_eq!(report.ok, 1);
    assert!((report.eventual_success_rate - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(report.errors["503"], 1);
    assert_eq!(report.errors["timeout"], 1, "the open request was aborted");
    assert_eq!(report.attempt_errors["503"], 3);
    assert_eq!(report.retry_after.samples, 3);
    assert_eq!(report.retry_after.p50, Some(1.0));
    assert_eq!(
        report.targets["http://a"],
        TargetLoad { attempts: 2, ok: 0 }
    );
    assert_eq!(
        report.targets["http://b"],
        TargetLoad { attempts: 2, ok: 1 }
    );
    let p0 = &report.priority_classes["P0"];
    assert_eq!(
        (p0.requests, p0.attempts, p0.ok, p0.success_rate),
        (1, 2, 1, 1.0)
    );
    assert_eq!(p0.ttft.p50, Some(0.03));
    let p2 = &report.priority_classes["P2"];
    assert_eq!((p2.requests, p2.ok, p2.success_rate), (2, 0, 0.0));
    assert_eq!(report.client_groups["honor"].requests, 3);

    let timeline = report.timeline.expect("timeline requested");
    assert_eq!(timeline.len(), 2);
    assert_eq!(
        (
            timeline[0].first_attempts,
            timeline[0].ok,
            timeline[0].admitted
        ),
        (3, 0, 0)
    );
    assert_eq!((timeline[1].retries, timeline[1].ok), (1, 1));
    assert_eq!(timeline[1].success_rate, Some(1.0));
}

#[test]
fn empty_run_reports_zeros_not_nan() {
    let report = Collector::default().finish(RunFacts::for_tests());
    assert_eq!(report.hit_rate(), 0.0);
    assert_eq!(report.load_cv(), 0.0);
    assert_eq!(report.ttft.p50, None);
    assert_eq!(report.eventual_success_rate, 0.0);
    assert!(serde_json::to_string(&report).is_ok());
}
