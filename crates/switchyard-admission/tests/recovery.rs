//! Overload and recovery through the facade: P2 pause and resume, the capacity ramp with its
//! step-back, retries held back while recovering, queue timeouts read as demand overload.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use http::StatusCode;
use std::time::Duration;
use support::{Fixture, counter, fixture, run_pending, tags};
use switchyard_admission::{AdmissionConfig, GatewayState, code, gate};
use switchyard_core::{Priority, RequestTags};

const S: Duration = Duration::from_secs(1);

fn with_slots(max_concurrent: u32) -> Fixture {
    fixture(AdmissionConfig {
        max_concurrent,
        ..AdmissionConfig::default()
    })
}

fn overload(f: &Fixture) {
    f.admission.report_fleet(0.8);
    f.clock.advance(S * 5);
    f.admission.tick();
    assert_eq!(f.admission.state(), GatewayState::Overloaded);
}

fn recover(f: &Fixture) {
    f.admission.report_fleet(0.1);
    f.clock.advance(S * 15);
    f.admission.tick();
    assert_eq!(f.admission.state(), GatewayState::Recovering);
}

#[tokio::test]
async fn overload_pauses_p2_and_recovery_resumes_it() {
    let f = with_slots(10);
    drop(
        f.admission
            .admit(&tags("anonymous", Priority::P2), 1)
            .await
            .expect("normal: P2 runs"),
    );
    overload(&f);
    let snapshot = f.admission.snapshot();
    assert!(snapshot.p2_paused);
    assert_eq!(
        (snapshot.capacity_ratio, snapshot.dispatch_capacity),
        (0.3, 3)
    );
    let refused = f
        .admission
        .admit(&tags("anonymous", Priority::P2), 1)
        .await
        .unwrap_err();
    assert_eq!(
        (refused.status, refused.gate, refused.code),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            gate::QUEUE,
            code::P2_PAUSED
        )
    );
    assert!(refused.retry_after >= S);
    drop(
        f.admission
            .admit(&tags("anonymous", Priority::P1), 1)
            .await
            .expect("online traffic still runs"),
    );
    recover(&f);
    assert!(!f.admission.snapshot().p2_paused);
    drop(
        f.admission
            .admit(&tags("anonymous", Priority::P2), 1)
            .await
            .expect("P2 resumed"),
    );
}

#[tokio::test]
async fn the_ramp_climbs_thirty_fifty_eighty_hundred_and_steps_back_on_an_error_rebound() {
    let f = with_slots(100);
    overload(&f);
    recover(&f);
    let capacity = || f.admission.snapshot().dispatch_capacity;
    assert_eq!(capacity(), 30);
    f.clock.advance(S * 30);
    f.admission.tick();
    assert_eq!(capacity(), 50);
    for _ in 0..20 {
        let mut permit = f
            .admission
            .admit(&tags("anonymous", Priority::P1), 1)
            .await
            .unwrap();
        permit.mark_failed();
        permit.settle(1);
    }
    assert_eq!(capacity(), 30, "errors rebounded: one level back");
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_ramp_steps_total",
            &[("direction", "back")]
        ),
        1.0
    );
    let mut seen = Vec::new();
    for _ in 0..3 {
        f.clock.advance(S * 30);
        f.admission.tick();
        seen.push(capacity());
    }
    assert_eq!(seen, vec![50, 80, 100]);
    assert_eq!(
        f.admission.state(),
        GatewayState::Recovering,
        "the top level is held too"
    );
    f.clock.advance(S * 30);
    f.admission.tick();
    assert_eq!(f.admission.state(), GatewayState::Normal);
    for (from, to) in [
        ("normal", "overloaded"),
        ("overloaded", "recovering"),
        ("recovering", "normal"),
    ] {
        let n = counter(
            &f.registry,
            "switchyard_admission_state_transitions_total",
            &[("from", from), ("to", to)],
        );
        assert_eq!(n, 1.0, "{from} → {to}");
    }
}

#[tokio::test]
async fn while_recovering_new_requests_go_before_retries() {
    let f = with_slots(100);
    let retry = RequestTags {
        client_retry: 1,
        ..tags("anonymous", Priority::P1)
    };
    drop(
        f.admission
            .admit(&retry, 1)
            .await
            .expect("normal: retries are admitted"),
    );
    overload(&f);
    recover(&f);
    let refused = f.admission.admit(&retry, 1).await.unwrap_err();
    assert_eq!(
        (refused.status, refused.gate, refused.code),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            gate::RECOVERY,
            code::RETRY_DEFERRED
        )
    );
    for _ in 0..4 {
        drop(
            f.admission
                .admit(&tags("anonymous", Priority::P1), 1)
                .await
                .unwrap(),
        );
    }
    drop(
        f.admission
            .admit(&retry, 1)
            .await
            .expect("20 %: one retry per four new requests"),
    );
    assert!(f.admission.admit(&retry, 1).await.is_err());
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_client_retries_total",
            &[("outcome", "deferred")]
        ),
        2.0
    );
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_client_retries_total",
            &[("outcome", "admitted")]
        ),
        2.0
    );
}

#[tokio::test]
async fn while_recovering_p0_keeps_its_guaranteed_slots_retries_included() {
    // 10 slots: the ramp's first level offers 3; P0 is guaranteed 4 of full capacity.
    let f = with_slots(10);
    overload(&f);
    recover(&f);
    assert_eq!(f.admission.snapshot().dispatch_capacity, 3);
    let p0_retry = RequestTags {
        client_retry: 2,
        ..tags("anonymous", Priority::P0)
    };
    let p1_retry = RequestTags {
        client_retry: 2,
        ..tags("anonymous", Priority::P1)
    };
    let first = f
        .admission
        .admit(&p0_retry, 1)
        .await
        .expect("P0 retry admitted");
    let refused = f.admission.admit(&p1_retry, 1).await.unwrap_err();
    assert_eq!(refused.code, code::RETRY_DEFERRED, "P1 retries still wait");
    let mut held = vec![first];
    for _ in 0..2 {
        held.push(
            f.admission
                .admit(&tags("anonymous", Priority::P1), 1)
                .await
                .unwrap(),
        );
    }
    assert_eq!(
        f.admission.snapshot().in_flight,
        3,
        "the ramp's 3 slots are full"
    );
    // Past the ramp's cut P0 still has its guarantee of full capacity: admitted at once,
    // the gateway going to 4 in flight (P0's guarantee), no further.
    held.push(
        f.admission
            .admit(&tags("anonymous", Priority::P0), 1)
            .await
            .expect("P0 admitted past the cut"),
    );
    assert_eq!(f.admission.snapshot().in_flight, 4);
    // Queued P1 first, then P0: the freed slot goes to P0, below its guarantee, while P1
    // waits for the gateway to be under the cut.
    let admission = f.admission.clone();
    let p1 =
        tokio::spawn(async move { admission.admit(&tags("anonymous", Priority::P1), 1).await });
    run_pending().await;
    let admission = f.admission.clone();
    let p0 =
        tokio::spawn(async move { admission.admit(&tags("anonymous", Priority::P0), 1).await });
    run_pending().await;
    let queued = f.admission.snapshot().queued;
    assert_eq!((queued.p0, queued.p1), (1, 1));
    drop(held.remove(1));
    run_pending().await;
    assert!(p0.is_finished() && !p1.is_finished(), "P0 went first");
    assert_eq!(f.admission.snapshot().in_flight_by_class.p0, 3);
    assert_eq!(f.admission.snapshot().in_flight, 4);
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_dispatches_total",
            &[("class", "P0"), ("path", "guarantee")]
        ),
        1.0
    );
    let p0 = p0.await.unwrap().expect("P0 admitted");
    drop(held);
    assert!(p1.await.unwrap().is_ok());
    drop(p0);
}

#[tokio::test(start_paused = true)]
async fn queue_timeouts_are_demand_overload_and_keep_full_capacity() {
    let f = with_slots(1);
    let held = f
        .admission
        .admit(&tags("anonymous", Priority::P1), 1)
        .await
        .unwrap();
    let mut waiters = Vec::new();
    for _ in 0..25 {
        let admission = f.admission.clone();
        waiters.push(tokio::spawn(async move {
            admission
                .admit(&tags("anonymous", Priority::P1), 1)
                .await
                .unwrap_err()
        }));
    }
    run_pending().await;
    assert_eq!(f.admission.snapshot().queued.p1, 25);
    let started = tokio::time::Instant::now();
    for waiter in waiters {
        let refused = waiter.await.unwrap();
        assert_eq!(
            (refused.gate, refused.code),
            (gate::QUEUE, code::QUEUE_TIMEOUT)
        );
    }
    assert_eq!(started.elapsed(), S * 2, "the P1 queue timeout");
    f.clock.advance(S * 30);
    f.admission.tick();
    let snapshot = f.admission.snapshot();
    assert_eq!(
        snapshot.state,
        GatewayState::Normal,
        "the gateway's own refusals never engage the ramp"
    );
    assert_eq!(snapshot.dispatch_capacity, 1, "full capacity");
    assert!(!snapshot.p2_paused);
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_detector_verdicts_total",
            &[("verdict", "demand_overload")]
        ),
        1.0
    );
    drop(held);
}

#[tokio::test]
async fn the_snapshot_serialises_for_the_admin_api() {
    let f = with_slots(10);
    overload(&f);
    recover(&f);
    let json = serde_json::to_value(f.admission.snapshot()).unwrap();
    assert_eq!(json["state"], "recovering");
    assert_eq!(json["ramp_level"], 0);
    assert_eq!(json["dispatch_capacity"], 3);
    assert_eq!(json["queued"]["p2"], 0);
    assert_eq!(json["anonymous"], true);
}
