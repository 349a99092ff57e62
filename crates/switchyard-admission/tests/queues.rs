//! Priority queues through the facade: WFQ shares under saturation, minimum shares, caller
//! fairness; plus identity refusals, construction errors and metric registration.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use http::{HeaderMap, HeaderValue, StatusCode};
use support::{counter, fixture, run_pending, tags, tenant, with_tenants};
use switchyard_admission::{
    Admission, AdmissionConfig, AdmissionError, AdmissionPermit, InMemoryLedger, PerClass, code,
    gate,
};
use switchyard_core::{ManualClock, Priority};
use tokio::sync::mpsc;

const HOUR_MS: u64 = 3_600_000;

fn one_slot(weights: PerClass<f64>) -> AdmissionConfig {
    let mut config = AdmissionConfig {
        max_concurrent: 1,
        ..AdmissionConfig::default()
    };
    config.wfq.weights = weights;
    config.wfq.queue_timeout_ms = PerClass {
        p0: HOUR_MS,
        p1: HOUR_MS,
        p2: HOUR_MS,
    };
    config
}

/// Fills the queues with `backlog[class]` waiters per class (callers rotate over four
/// names), then frees the slot `serve` times and returns each class's share in percent.
/// The backlogs must outlast `serve`, or a drained class skews the shares.
async fn shares(config: AdmissionConfig, backlog: [usize; 3], serve: usize) -> [f64; 3] {
    let f = fixture(config);
    let held = f
        .admission
        .admit(&tags("anonymous", Priority::P0), 1)
        .await
        .unwrap();
    let (admitted, mut served) = mpsc::unbounded_channel::<(Priority, AdmissionPermit)>();
    for class in Priority::ALL {
        for i in 0..backlog[class.index()] {
            let admission = f.admission.clone();
            let admitted = admitted.clone();
            tokio::spawn(async move {
                let permit = admission
                    .admit(&tags(&format!("c{}", i % 4), class), 1)
                    .await
                    .unwrap();
                let _ = admitted.send((class, permit));
            });
        }
    }
    let mut queued = [0; 3];
    for _ in 0..1_000 {
        run_pending().await;
        let snapshot = f.admission.snapshot().queued;
        queued = [snapshot.p0, snapshot.p1, snapshot.p2];
        if queued == backlog {
            break;
        }
    }
    assert_eq!(queued, backlog, "every waiter queued");
    drop(held);
    let mut counts = [0usize; 3];
    for _ in 0..serve {
        let (class, permit) = served.recv().await.unwrap();
        counts[class.index()] += 1;
        drop(permit); // frees the slot for the next waiter WFQ picks
    }
    counts.map(|c| c as f64 * 100.0 / serve as f64)
}

fn assert_within(actual: [f64; 3], expected: [f64; 3], points: f64) {
    for i in 0..3 {
        assert!(
            (actual[i] - expected[i]).abs() <= points,
            "P{i} got {:.1} %, expected {:.1} % ± {points} (all: {actual:?})",
            actual[i],
            expected[i]
        );
    }
}

#[tokio::test(start_paused = true)]
async fn saturated_classes_share_dispatch_slots_five_two_one() {
    let weights = AdmissionConfig::default().wfq.weights;
    let shares = shares(one_slot(weights), [600, 300, 200], 800).await;
    assert_within(shares, [62.5, 25.0, 12.5], 3.0);
}

#[tokio::test(start_paused = true)]
async fn minimum_shares_hold_when_p0_floods() {
    let greedy = PerClass {
        p0: 100.0,
        p1: 2.0,
        p2: 1.0,
    };
    let shares = shares(one_slot(greedy), [1_000, 300, 300], 600).await;
    assert!(
        shares[1] >= 15.0 - 1.0 && shares[2] >= 5.0 - 1.0,
        "{shares:?}"
    );
    assert_within(shares, [80.0, 15.0, 5.0], 2.0);
}

#[tokio::test(start_paused = true)]
async fn callers_of_one_class_are_served_in_turn() {
    let f = fixture(one_slot(AdmissionConfig::default().wfq.weights));
    let held = f
        .admission
        .admit(&tags("x", Priority::P1), 1)
        .await
        .unwrap();
    let (admitted, mut served) = mpsc::unbounded_channel::<(&'static str, AdmissionPermit)>();
    for (caller, count) in [("heavy", 50), ("light", 5)] {
        for _ in 0..count {
            let admission = f.admission.clone();
            let admitted = admitted.clone();
            tokio::spawn(async move {
                let permit = admission
                    .admit(&tags(caller, Priority::P1), 1)
                    .await
                    .unwrap();
                let _ = admitted.send((caller, permit));
            });
        }
        run_pending().await;
    }
    drop(held);
    let mut order = Vec::new();
    for _ in 0..12 {
        let (caller, permit) = served.recv().await.unwrap();
        order.push(caller);
        drop(permit);
    }
    assert_eq!(
        order.iter().filter(|c| **c == "light").count(),
        5,
        "{order:?}"
    );
    assert!(
        order[..10].windows(2).all(|w| w[0] != w[1]),
        "heavy cannot starve light: {order:?}"
    );
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

#[tokio::test]
async fn identity_refusals_are_401_403_and_400_without_retry_after() {
    let mut free = tenant("free");
    free.max_priority = Priority::P1;
    let f = fixture(with_tenants(vec![free]));
    let unauthorized = f.admission.resolve(&HeaderMap::new()).unwrap_err();
    assert_eq!(
        (unauthorized.status, unauthorized.gate),
        (StatusCode::UNAUTHORIZED, gate::IDENTITY)
    );
    assert_eq!(unauthorized.retry_after_header_secs(), None);
    let warmup = headers(&[
        ("authorization", "Bearer key-free"),
        ("x-switchyard-purpose", "warmup"),
    ]);
    let forbidden = f.admission.resolve(&warmup).unwrap_err();
    assert_eq!(
        (forbidden.status, forbidden.code),
        (StatusCode::FORBIDDEN, code::FORBIDDEN_PURPOSE)
    );
    let probe = headers(&[
        ("authorization", "Bearer key-free"),
        ("x-switchyard-purpose", "probe"),
    ]);
    assert_eq!(
        f.admission.resolve(&probe).unwrap_err().status,
        StatusCode::FORBIDDEN
    );
    let bad = headers(&[
        ("authorization", "Bearer key-free"),
        ("x-switchyard-priority", "P9"),
    ]);
    assert_eq!(
        f.admission.resolve(&bad).unwrap_err().status,
        StatusCode::BAD_REQUEST
    );
    let ok = headers(&[
        ("authorization", "Bearer key-free"),
        ("x-switchyard-priority", "P0"),
    ]);
    let tags = f.admission.resolve(&ok).unwrap();
    assert_eq!((&*tags.caller, tags.priority), ("free", Priority::P1));
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_identity_total",
            &[("outcome", "forbidden")]
        ),
        2.0
    );
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_refusals_total",
            &[("gate", "identity"), ("caller", "unknown")]
        ),
        4.0
    );
}

#[test]
fn construction_validates_and_registers_metrics_once_per_registry() {
    let clock = ManualClock::new();
    let ledger = std::sync::Arc::new(InMemoryLedger::new(std::sync::Arc::new(clock.clone())));
    let registry = prometheus::Registry::new();
    let mut invalid = AdmissionConfig::default();
    invalid.wfq.queue_timeout_ms.p2 = 0;
    let error = Admission::new(
        invalid,
        ledger.clone(),
        std::sync::Arc::new(clock.clone()),
        &registry,
    )
    .err()
    .unwrap();
    assert_eq!(error.field(), Some("wfq.queue_timeout_ms.p2"));
    let admission = Admission::new(
        AdmissionConfig::default(),
        ledger.clone(),
        std::sync::Arc::new(clock.clone()),
        &registry,
    );
    assert!(admission.is_ok());
    let names: Vec<String> = registry
        .gather()
        .iter()
        .map(|f| f.name().to_string())
        .collect();
    for expected in [
        "switchyard_admission_queue_depth",
        "switchyard_admission_dispatch_slots_capacity",
        "switchyard_admission_dispatch_slots_in_use",
        "switchyard_admission_gateway_state",
        "switchyard_admission_ramp_capacity_ratio",
        "switchyard_admission_ramp_steps_total",
        "switchyard_admission_bucket_settlements_total",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} missing from {names:?}"
        );
    }
    assert_eq!(
        counter(
            &registry,
            "switchyard_admission_dispatch_slots_capacity",
            &[]
        ),
        256.0
    );
    assert_eq!(
        counter(
            &registry,
            "switchyard_admission_gateway_state",
            &[("state", "normal")]
        ),
        1.0
    );
    let twice = Admission::new(
        AdmissionConfig::default(),
        ledger,
        std::sync::Arc::new(clock),
        &registry,
    );
    assert!(matches!(twice.err(), Some(AdmissionError::Metrics(_))));
}

#[test]
fn the_admit_future_can_cross_threads() {
    fn assert_send<T: Send>(_: &T) {}
    let f = fixture(AdmissionConfig::default());
    let tags = tags("anonymous", Priority::P1);
    let future = f.admission.admit(&tags, 1);
    assert_send(&future);
}
