#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Per-request cost of worker selection with the prefilter chain (routability of every
//! worker, candidate building, policy) over 64 workers, a quarter of them filtered out.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use switchyard_gateway::Config;
use switchyard_gateway::openai::{self, Route};
use switchyard_gateway::proxy::select::select_worker;
use switchyard_workers::WorkerSpec;

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut config = Config::default();
    config.server.port = 0;
    // Health checks hit closed ports: give them no time to mark anything during the run,
    // then drain a quarter of the fleet so the prefilter has something to drop.
    config.health.health.interval_ms = 3_600_000;
    config.health.health.suspect_interval_ms = 3_600_000;
    config.health.health.unhealthy_threshold = 100;
    config.workers = (0..64)
        .map(|i| WorkerSpec {
            name: format!("w{i}"),
            url: format!("http://127.0.0.1:{}", 1 + i),
            models: Some(vec!["m".into()]),
            health_path: None,
            engine: None,
        })
        .collect();
    for policy in ["round_robin", "consistent_hash", "cache_aware"] {
        let mut config = config.clone();
        config.routing.policy = policy.into();
        let gateway = runtime
            .block_on(switchyard_gateway::start(config, None))
            .unwrap();
        let state = gateway.state().clone();
        runtime.block_on(async {
            for i in (0..64).step_by(4) {
                let _ = state.stack.registry.drain(&format!("w{i}")).await;
            }
        });
        let body = serde_json::json!({
            "model": "m",
            "messages": [{"role": "user", "content": "hello ".repeat(200)}],
        })
        .to_string();
        let parsed = openai::parse(Route::ChatCompletions, body.as_bytes()).unwrap();
        c.bench_function(&format!("select_64_workers_16_filtered/{policy}"), |b| {
            b.iter(|| {
                black_box(
                    select_worker(
                        &state.stack,
                        Route::ChatCompletions,
                        &parsed,
                        Some("session-1"),
                        &[],
                    )
                    .unwrap(),
                )
            })
        });
        runtime.block_on(gateway.shutdown());
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
