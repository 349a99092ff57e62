//! Routing cost per request: cache-aware select+insert on ~10 KB (≈ 2,000-token) prompts with
//! 10,000 cached conversations and 8 workers (prefix hits and hash placement of new prompts),
//! consistent-hash select over 8 and 64 workers (session keys, hot-key detection on), and
//! round robin for scale.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::sync::Arc;
use support::{CONVERSATIONS, SYSTEM_BYTES, SYSTEM_PROMPTS, TAIL_BYTES, WORKERS, text};
use switchyard_core::WallClock;
use switchyard_core::WorkerId;
use switchyard_router::{
    CacheAwareConfig, CacheAwarePolicy, Candidate, ConsistentHashConfig, ConsistentHashPolicy,
    DiscardAffinity, HotspotConfig, RoundRobinPolicy, RouteRequest, RoutingKeyConfig,
    RoutingPolicy,
};

const TURN_BYTES: usize = 150;

/// In-flight counts spread below the imbalance guard, like a healthy fleet.
fn fleet(rng: &mut SmallRng, workers: u32) -> Vec<Candidate> {
    (0..workers)
        .map(|id| Candidate {
            id: WorkerId(id),
            in_flight: rng.random_range(0..8),
            reported: None,
        })
        .collect()
}

/// Reports workers `0..workers` to the policy, as the registry observer does.
fn register(policy: &dyn RoutingPolicy, workers: u32) {
    for id in 0..workers {
        policy.worker_added(WorkerId(id), &format!("worker-{id}"));
    }
}

fn select(policy: &dyn RoutingPolicy, prompt: &str, candidates: &[Candidate]) {
    let request = RouteRequest {
        prompt,
        ..Default::default()
    };
    black_box(policy.select(&request, candidates));
}

struct Warmed {
    policy: CacheAwarePolicy,
    systems: Vec<String>,
    conversations: Vec<String>,
    candidates: Vec<Candidate>,
}

fn warmed_policy(rng: &mut SmallRng) -> Warmed {
    let policy = CacheAwarePolicy::new(
        CacheAwareConfig::default(),
        &ConsistentHashConfig::default(),
        RoutingKeyConfig::default(),
        WallClock::system(),
        Arc::new(DiscardAffinity),
    )
    .unwrap();
    register(&policy, WORKERS);
    let candidates = fleet(rng, WORKERS);
    let systems: Vec<String> = (0..SYSTEM_PROMPTS)
        .map(|_| text(rng, SYSTEM_BYTES))
        .collect();
    let conversations: Vec<String> = (0..CONVERSATIONS)
        .map(|i| format!("{}{}", systems[i % SYSTEM_PROMPTS], text(rng, TAIL_BYTES)))
        .collect();
    for prompt in &conversations {
        select(&policy, prompt, &candidates);
    }
    Warmed {
        policy,
        systems,
        conversations,
        candidates,
    }
}

fn cache_aware(c: &mut Criterion) {
    let mut rng = SmallRng::seed_from_u64(42);
    let warmed = warmed_policy(&mut rng);
    let mut group = c.benchmark_group("cache_aware");

    // Runs first, before the growing benchmarks below push the tree into eviction.
    group.bench_function("repeated_prompt", |b| {
        b.iter_batched_ref(
            || rng.random_range(0..CONVERSATIONS),
            |index| {
                let prompt = &warmed.conversations[*index];
                select(&warmed.policy, prompt, &warmed.candidates)
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("next_turn_of_cached_conversation", |b| {
        b.iter_batched_ref(
            || {
                let base = &warmed.conversations[rng.random_range(0..CONVERSATIONS)];
                format!("{base}{}", text(&mut rng, TURN_BYTES))
            },
            |prompt| select(&warmed.policy, prompt, &warmed.candidates),
            BatchSize::SmallInput,
        )
    });
    // A chat turn with a session: the conversation is named by its opening (one more hash
    // over system prompt + first user message) and later turns stick to where it lives.
    group.bench_function("next_turn_of_a_session_chat", |b| {
        b.iter_batched_ref(
            || {
                let index = rng.random_range(0..CONVERSATIONS);
                let system = &warmed.systems[index % SYSTEM_PROMPTS];
                let opening = &warmed.conversations[index][system.len()..];
                let prompt = format!(
                    "<|system|>{system}\n<|user|>{opening}\n<|assistant|>{}\n<|user|>{}\n",
                    text(&mut rng, TURN_BYTES),
                    text(&mut rng, TURN_BYTES)
                );
                (format!("s{index}"), prompt)
            },
            |(session, prompt)| {
                let request = RouteRequest {
                    prompt,
                    session_id: Some(session),
                    user: None,
                };
                black_box(warmed.policy.select(&request, &warmed.candidates));
            },
            BatchSize::SmallInput,
        )
    });
    group.bench_function("new_conversation_on_shared_system_prompt", |b| {
        b.iter_batched_ref(
            || {
                let system = &warmed.systems[rng.random_range(0..SYSTEM_PROMPTS)];
                format!("{system}{}", text(&mut rng, TAIL_BYTES))
            },
            |prompt| select(&warmed.policy, prompt, &warmed.candidates),
            BatchSize::SmallInput,
        )
    });
    // A prompt nobody caches (its leading block is new): hash placement on the ring.
    group.bench_function("new_prompt_hash_placement", |b| {
        b.iter_batched_ref(
            || text(&mut rng, SYSTEM_BYTES + TAIL_BYTES),
            |prompt| select(&warmed.policy, prompt, &warmed.candidates),
            BatchSize::SmallInput,
        )
    });
    group.finish();
    eprintln!(
        "cache_aware tree holds {} text bytes after the benchmarks",
        warmed.policy.tree_bytes()
    );
}

fn consistent_hash(c: &mut Criterion) {
    const SESSIONS: usize = 100_000;
    let mut rng = SmallRng::seed_from_u64(11);
    let sessions: Vec<String> = (0..SESSIONS)
        .map(|i| format!("{:016x}-{i}", rng.random::<u64>()))
        .collect();
    let mut group = c.benchmark_group("consistent_hash");
    for (workers, hotspot) in [(8, true), (8, false), (64, true)] {
        let policy = ConsistentHashPolicy::new(
            ConsistentHashConfig::default(),
            HotspotConfig {
                enabled: hotspot,
                ..Default::default()
            },
            RoutingKeyConfig::default(),
            WallClock::system(),
        );
        register(&policy, workers);
        let candidates = fleet(&mut rng, workers);
        let name = if hotspot {
            format!("select_session/{workers}_workers")
        } else {
            format!("select_session_hotspot_off/{workers}_workers")
        };
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || rng.random_range(0..SESSIONS),
                |index| {
                    let request = RouteRequest {
                        prompt: "hello",
                        session_id: Some(&sessions[*index]),
                        user: None,
                    };
                    black_box(policy.select(&request, &candidates))
                },
                BatchSize::SmallInput,
            )
        });
        if workers == 8 && hotspot {
            // No session or user: the key is the prompt's first 256 bytes.
            let prompts: Vec<String> = (0..1_000).map(|_| text(&mut rng, 2_048)).collect();
            group.bench_function("select_prompt_prefix/8_workers", |b| {
                b.iter_batched_ref(
                    || rng.random_range(0..prompts.len()),
                    |index| select(&policy, &prompts[*index], &candidates),
                    BatchSize::SmallInput,
                )
            });
        }
    }
    group.finish();
}

fn round_robin(c: &mut Criterion) {
    let policy = RoundRobinPolicy::new();
    let candidates = fleet(&mut SmallRng::seed_from_u64(7), WORKERS);
    c.bench_function("round_robin/select", |b| {
        b.iter(|| select(&policy, "prompt", &candidates))
    });
}

criterion_group!(benches, cache_aware, consistent_hash, round_robin);
criterion_main!(benches);
