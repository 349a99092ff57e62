#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Cost of the request hot path: `reserve` + `settle` against a real single-node ledger
//! (the lease is local; renewals run in the background on the node's own tasks).

use criterion::{Criterion, criterion_group, criterion_main};
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{Priority, Purpose, QuotaLedger, QuotaScope, SpendTags, SystemClock};
use switchyard_ledger::{BudgetSpec, LedgerConfig, LedgerNode};

fn hot_path(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::TempDir::new().unwrap();
    let node = runtime.block_on(async {
        let mut config = LedgerConfig::new(1, "127.0.0.1:0", dir.path()).for_tests();
        config.cluster_secret = "bench".into();
        // One big lease: the bench measures the steady state, not lease sizing.
        config.lease.min_demand_tokens = 1 << 50;
        let node = LedgerNode::start(config, &prometheus::Registry::new(), Arc::new(SystemClock))
            .await
            .unwrap();
        node.initialize_single().await.unwrap();
        node.wait_for_leader(Duration::from_secs(5)).await.unwrap();
        let spec = BudgetSpec {
            max_lease_tokens: 0,
            ..BudgetSpec::daily(u64::MAX / 4)
        };
        node.set_budget(QuotaScope::caller("acme"), spec.clone(), "bench")
            .await
            .unwrap();
        // Fleet rate and concurrency set, far above what the bench reaches: the cost of the
        // share checks (bucket + in-flight slot) without refusals.
        let shared = BudgetSpec {
            rate_tokens_per_s: 1 << 40,
            max_concurrency: 1 << 20,
            ..spec
        };
        node.set_budget(QuotaScope::caller("shared"), shared, "bench")
            .await
            .unwrap();
        node
    });
    let quota = node.quota();
    let budgeted = SpendTags {
        scope: QuotaScope::caller("acme"),
        purpose: Purpose::Business,
        priority: Priority::P1,
    };
    let unbudgeted = SpendTags {
        scope: QuotaScope::caller("free"),
        ..budgeted.clone()
    };
    let with_shares = SpendTags {
        scope: QuotaScope::caller("shared"),
        ..budgeted.clone()
    };
    for tags in [&budgeted, &with_shares] {
        while quota.reserve(tags, 1).map(|r| quota.settle(r, 1)).is_err() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    c.bench_function("reserve_settle_budgeted_lease", |b| {
        b.iter(|| {
            let r = quota.reserve(&budgeted, 10).unwrap();
            quota.settle(r, 12);
        })
    });
    c.bench_function(
        "reserve_settle_lease_with_rate_and_concurrency_shares",
        |b| {
            b.iter(|| {
                let r = quota.reserve(&with_shares, 10).unwrap();
                quota.settle(r, 12);
            })
        },
    );
    c.bench_function("reserve_settle_unbudgeted", |b| {
        b.iter(|| {
            let r = quota.reserve(&unbudgeted, 10).unwrap();
            quota.settle(r, 12);
        })
    });
    c.bench_function("water_level", |b| {
        b.iter(|| quota.water_level(&budgeted.scope))
    });
    runtime.block_on(node.shutdown());
}

criterion_group!(benches, hot_path);
criterion_main!(benches);
