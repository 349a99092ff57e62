//! The three gates through the facade: budget thresholds, token bucket, concurrency limit,
//! settlement, and rollback when a request is refused further on or abandoned.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use http::StatusCode;
use std::time::Duration;
use support::{counter, fixture, run_pending, scope, tags, tenant, with_tenants};
use switchyard_admission::{AdmissionConfig, TenantConfig, code, gate};
use switchyard_core::{Priority, Purpose, RequestTags};

fn budgeted() -> TenantConfig {
    TenantConfig {
        tokens_per_day: Some(1_000),
        core: true,
        ..tenant("acme")
    }
}

async fn spend(f: &support::Fixture, tokens: u64) {
    let permit = f
        .admission
        .admit(&tags("acme", Priority::P0), tokens)
        .await
        .unwrap();
    permit.settle(tokens);
}

#[tokio::test]
async fn the_soft_limit_sheds_p2_and_warmup_past_eighty_percent() {
    let f = fixture(with_tenants(vec![budgeted()]));
    spend(&f, 790).await;
    let p2 = tags("acme", Priority::P2);
    let permit = f
        .admission
        .admit(&p2, 10)
        .await
        .expect("exactly 80 % still passes");
    permit.settle(10);
    let refused = f.admission.admit(&p2, 1).await.unwrap_err();
    assert_eq!(
        (refused.status, refused.gate, refused.code),
        (
            StatusCode::TOO_MANY_REQUESTS,
            gate::BUDGET,
            code::BUDGET_SOFT_LIMIT
        )
    );
    assert!(refused.retry_after >= Duration::from_secs(1));
    let warmup = RequestTags {
        purpose: Purpose::Warmup,
        ..tags("acme", Priority::P0)
    };
    assert_eq!(
        f.admission.admit(&warmup, 1).await.unwrap_err().code,
        code::BUDGET_SOFT_LIMIT
    );
    let level = scope(&f.admission.snapshot(), "acme")
        .budget_water_level
        .unwrap();
    assert!(
        (level - 0.8).abs() < 1e-9,
        "refused requests hold nothing: {level}"
    );
    drop(
        f.admission
            .admit(&tags("acme", Priority::P1), 1)
            .await
            .expect("P1 passes the soft limit"),
    );
}

#[tokio::test]
async fn the_hard_limit_keeps_only_core_p0_past_ninety_five_percent() {
    let f = fixture(with_tenants(vec![
        budgeted(),
        TenantConfig {
            tokens_per_day: Some(1_000),
            ..tenant("plain")
        },
    ]));
    spend(&f, 950).await;
    let refused = f
        .admission
        .admit(&tags("acme", Priority::P1), 1)
        .await
        .unwrap_err();
    assert_eq!(
        (refused.gate, refused.code),
        (gate::BUDGET, code::BUDGET_HARD_LIMIT)
    );
    let core_p0 = RequestTags {
        core_caller: true,
        ..tags("acme", Priority::P0)
    };
    let permit = f
        .admission
        .admit(&core_p0, 40)
        .await
        .expect("core P0 survives the hard limit");
    permit.settle(40);
    let exhausted = f.admission.admit(&core_p0, 11).await.unwrap_err();
    assert_eq!(exhausted.code, code::BUDGET_EXHAUSTED, "but not past 100 %");

    let other = f
        .admission
        .admit(&tags("plain", Priority::P0), 951)
        .await
        .unwrap_err();
    assert_eq!(
        other.code,
        code::BUDGET_HARD_LIMIT,
        "non-core P0 is refused past 95 %"
    );
}

#[tokio::test]
async fn per_purpose_budgets_are_checked_besides_the_callers() {
    let mut acme = budgeted();
    acme.tokens_per_day = Some(10_000);
    acme.allow_warmup = true;
    acme.purposes = vec![switchyard_admission::PurposeLimits {
        purpose: Purpose::Warmup,
        tokens_per_day: Some(100),
        ..Default::default()
    }];
    let f = fixture(with_tenants(vec![acme]));
    let warmup = RequestTags {
        purpose: Purpose::Warmup,
        ..tags("acme", Priority::P1)
    };
    f.admission.admit(&warmup, 80).await.unwrap().settle(80);
    let refused = f.admission.admit(&warmup, 10).await.unwrap_err();
    assert_eq!(
        refused.code,
        code::BUDGET_SOFT_LIMIT,
        "warmup scope at 90 %"
    );
    drop(
        f.admission
            .admit(&tags("acme", Priority::P1), 500)
            .await
            .expect("business is unaffected"),
    );
}

#[tokio::test]
async fn the_token_bucket_refills_at_ninety_percent_of_quota_up_to_one_and_a_half_seconds() {
    let f = fixture(with_tenants(vec![TenantConfig {
        tokens_per_minute: Some(60_000),
        ..tenant("acme")
    }]));
    let p1 = tags("acme", Priority::P1);
    f.admission
        .admit(&p1, 1_350)
        .await
        .expect("a full burst")
        .settle(1_350);
    let refused = f.admission.admit(&p1, 900).await.unwrap_err();
    assert_eq!(
        (refused.status, refused.gate, refused.code),
        (
            StatusCode::TOO_MANY_REQUESTS,
            gate::RATE,
            code::RATE_LIMITED
        )
    );
    f.clock.advance(Duration::from_millis(999));
    assert!(f.admission.admit(&p1, 900).await.is_err());
    f.clock.advance(Duration::from_millis(1));
    f.admission
        .admit(&p1, 900)
        .await
        .expect("900 tokens/s refill")
        .settle(900);
    f.clock.advance(Duration::from_secs(60));
    let tokens = scope(&f.admission.snapshot(), "acme")
        .bucket_tokens
        .unwrap();
    assert_eq!(tokens, 1_350.0, "never above capacity");
}

#[tokio::test]
async fn settlement_refunds_overestimates_and_charges_bounded_debt() {
    let f = fixture(with_tenants(vec![TenantConfig {
        tokens_per_minute: Some(60_000),
        tokens_per_day: Some(1_000_000),
        ..tenant("acme")
    }]));
    let p1 = tags("acme", Priority::P1);
    let tokens = || {
        scope(&f.admission.snapshot(), "acme")
            .bucket_tokens
            .unwrap()
    };
    f.admission.admit(&p1, 1_000).await.unwrap().settle(200);
    assert_eq!(tokens(), 1_150.0, "800 refunded");
    f.admission.admit(&p1, 1_000).await.unwrap().settle(2_000);
    assert_eq!(tokens(), -850.0, "1 000 of debt on top of the estimate");
    f.admission.admit(&p1, 1).await.unwrap_err();
    f.clock.advance(Duration::from_secs(1));
    assert_eq!(tokens(), 50.0);
    f.admission.admit(&p1, 10).await.unwrap().settle(1_000_000);
    assert_eq!(tokens(), -1_350.0, "debt is bounded at one bucket");
    let level = scope(&f.admission.snapshot(), "acme")
        .budget_water_level
        .unwrap();
    assert!(
        (level - 1.0022).abs() < 1e-9,
        "the ledger books real usage: {level}"
    );
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_bucket_settlements_total",
            &[("outcome", "debt_capped")]
        ),
        1.0
    );
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_bucket_settlements_total",
            &[("outcome", "refund")]
        ),
        1.0
    );
}

#[tokio::test]
async fn a_permit_dropped_unsettled_books_its_estimate() {
    let f = fixture(with_tenants(vec![budgeted()]));
    drop(
        f.admission
            .admit(&tags("acme", Priority::P1), 300)
            .await
            .unwrap(),
    );
    let level = scope(&f.admission.snapshot(), "acme")
        .budget_water_level
        .unwrap();
    assert!((level - 0.3).abs() < 1e-9);
}

#[tokio::test(start_paused = true)]
async fn the_concurrency_gate_waits_three_hundred_ms_then_fails_fast() {
    let f = fixture(with_tenants(vec![TenantConfig {
        peak_in_flight: Some(3),
        ..tenant("acme")
    }]));
    let p1 = tags("acme", Priority::P1);
    let first = f.admission.admit(&p1, 1).await.unwrap();
    let second = f.admission.admit(&p1, 1).await.unwrap();
    assert_eq!(
        scope(&f.admission.snapshot(), "acme").max_in_flight,
        Some(2),
        "70 % of the peak"
    );
    let started = tokio::time::Instant::now();
    let refused = f.admission.admit(&p1, 1).await.unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_millis(300));
    assert_eq!(
        (refused.status, refused.gate, refused.code),
        (
            StatusCode::TOO_MANY_REQUESTS,
            gate::CONCURRENCY,
            code::CONCURRENCY_LIMIT
        )
    );
    let admission = f.admission.clone();
    let waiter = tokio::spawn(async move {
        admission
            .admit(&tags("acme", Priority::P1), 1)
            .await
            .map(drop)
    });
    tokio::time::sleep(Duration::from_millis(299)).await;
    drop(first);
    assert!(
        waiter.await.unwrap().is_ok(),
        "a slot freed within 300 ms is taken"
    );
    drop(second);
    assert_eq!(scope(&f.admission.snapshot(), "acme").in_flight, Some(0));
}

#[tokio::test(start_paused = true)]
async fn abandoning_admit_gives_back_every_gate() {
    let mut config = with_tenants(vec![TenantConfig {
        tokens_per_minute: Some(60_000),
        tokens_per_day: Some(10_000),
        max_in_flight: Some(5),
        ..tenant("acme")
    }]);
    config.max_concurrent = 1;
    let f = fixture(config);
    let p1 = tags("acme", Priority::P1);
    let held = f.admission.admit(&p1, 100).await.unwrap();
    let before = scope(&f.admission.snapshot(), "acme").clone();
    // Waits in the queue (no dispatch slot) and is dropped there.
    let abandoned =
        tokio::time::timeout(Duration::from_millis(50), f.admission.admit(&p1, 500)).await;
    assert!(abandoned.is_err(), "still queued when dropped");
    let after = f.admission.snapshot();
    assert_eq!(after.queued.p1, 0);
    assert_eq!(
        scope(&after, "acme"),
        &before,
        "bucket, budget and in-flight rolled back"
    );
    drop(held);
    run_pending().await;
    assert_eq!(f.admission.snapshot().in_flight, 0);
}

/// Retry-After advice, as (backoff floor, floor + 50 % jitter).
fn within(wait: Duration, floor: Duration) -> bool {
    wait >= floor && wait <= floor * 3 / 2
}

// Paused time: the queued waiter's timeout cannot fire while the refusals are counted.
#[tokio::test(start_paused = true)]
async fn retry_after_follows_the_client_not_the_callers_refusal_streak() {
    // No tenants: every client is `anonymous`. One dispatch slot held and one waiter
    // queued, so every further request is refused at once (queue full).
    let f = fixture(AdmissionConfig {
        max_concurrent: 1,
        max_queued: 1,
        ..AdmissionConfig::default()
    });
    let anonymous = RequestTags::anonymous();
    let held = f.admission.admit(&anonymous, 1).await.unwrap();
    let admission = f.admission.clone();
    let queued_tags = anonymous.clone();
    let queued = tokio::spawn(async move { admission.admit(&queued_tags, 1).await.is_ok() });
    run_pending().await;
    for _ in 0..1_000 {
        f.admission.admit(&anonymous, 1).await.unwrap_err();
    }
    for _ in 0..20 {
        let first = f.admission.admit(&anonymous, 1).await.unwrap_err();
        assert!(
            within(first.retry_after, Duration::from_secs(1)),
            "a fresh client after 1000 refusals of its caller: {:?}",
            first.retry_after
        );
    }
    let fifth_retry = RequestTags {
        client_retry: 5,
        ..anonymous.clone()
    };
    let wait = f
        .admission
        .admit(&fifth_retry, 1)
        .await
        .unwrap_err()
        .retry_after;
    assert!(within(wait, Duration::from_secs(32)), "5th retry: {wait:?}");
    drop(held);
    assert!(queued.await.unwrap());
}

#[tokio::test]
async fn a_tenants_refusal_streak_nudges_its_backoff_by_a_bounded_amount() {
    let f = fixture(with_tenants(vec![TenantConfig {
        tokens_per_minute: Some(60_000),
        ..tenant("acme")
    }]));
    let p1 = tags("acme", Priority::P1);
    f.admission.admit(&p1, 1_350).await.unwrap().settle(1_350);
    let mut waits = Vec::new();
    for _ in 0..150 {
        waits.push(f.admission.admit(&p1, 100).await.unwrap_err().retry_after);
    }
    // Refusals in a row 1-9: base; 10-99: x2; from 100: x4, and no further.
    assert!(within(waits[0], Duration::from_secs(1)), "{:?}", waits[0]);
    assert!(within(waits[8], Duration::from_secs(1)), "{:?}", waits[8]);
    assert!(within(waits[9], Duration::from_secs(2)), "{:?}", waits[9]);
    assert!(
        within(waits[149], Duration::from_secs(4)),
        "{:?}",
        waits[149]
    );
    let counted = RequestTags {
        client_retry: 5,
        ..p1.clone()
    };
    let wait = f
        .admission
        .admit(&counted, 100)
        .await
        .unwrap_err()
        .retry_after;
    assert!(
        within(wait, Duration::from_secs(60)),
        "5th retry plus the bounded streak is capped at 60 s: {wait:?}"
    );
    f.clock.advance(Duration::from_secs(60));
    f.admission.admit(&p1, 1_350).await.unwrap().settle(1_350);
    let wait = f.admission.admit(&p1, 100).await.unwrap_err().retry_after;
    assert!(
        within(wait, Duration::from_secs(1)),
        "the streak resets on an admission: {wait:?}"
    );
    assert_eq!(
        counter(
            &f.registry,
            "switchyard_admission_refusals_total",
            &[("gate", "rate"), ("caller", "acme"), ("class", "P1")]
        ),
        152.0
    );
}
