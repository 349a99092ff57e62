//! Routing cost per request: cache-aware select+insert on ~10 KB (≈ 2,000-token) prompts with
//! 10,000 cached conversations and 8 workers, and round robin for scale.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use switchyard_core::WorkerId;
use switchyard_router::{
    CacheAwareConfig, CacheAwarePolicy, Candidate, RoundRobinPolicy, RouteRequest, RoutingPolicy,
};

const WORKERS: u32 = 8;
const SYSTEM_PROMPTS: usize = 5;
const CONVERSATIONS: usize = 10_000;
const SYSTEM_BYTES: usize = 6 * 1024;
const TAIL_BYTES: usize = 4 * 1024;
const TURN_BYTES: usize = 150;

const WORDS: &[&str] = &[
    "the",
    "model",
    "answer",
    "request",
    "worker",
    "token",
    "cache",
    "prefix",
    "user",
    "assistant",
    "please",
    "explain",
    "why",
    "latency",
    "quota",
    "budget",
    "route",
    "stream",
];

fn text(rng: &mut SmallRng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(WORDS[rng.random_range(0..WORDS.len())]);
        out.push(' ');
    }
    out
}

/// In-flight counts spread below the imbalance guard, like a healthy fleet.
fn fleet(rng: &mut SmallRng) -> Vec<Candidate> {
    (0..WORKERS)
        .map(|id| Candidate {
            id: WorkerId(id),
            in_flight: rng.random_range(0..8),
        })
        .collect()
}

fn select(policy: &dyn RoutingPolicy, prompt: &str, candidates: &[Candidate]) {
    let request = RouteRequest {
        prompt,
        routing_key: None,
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
    let policy = CacheAwarePolicy::new(CacheAwareConfig::default()).unwrap();
    let candidates = fleet(rng);
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
    group.finish();
    eprintln!(
        "cache_aware tree holds {} text bytes after the benchmarks",
        warmed.policy.tree_bytes()
    );
}

fn round_robin(c: &mut Criterion) {
    let policy = RoundRobinPolicy::new();
    let candidates = fleet(&mut SmallRng::seed_from_u64(7));
    c.bench_function("round_robin/select", |b| {
        b.iter(|| select(&policy, "prompt", &candidates))
    });
}

criterion_group!(benches, cache_aware, round_robin);
criterion_main!(benches);
