//! Is the per-request routing read a throughput ceiling? The same cache_aware decision
//! (~10 KB chat prompts, 10,000 cached conversations, 8 workers, repeated prompts on a warm
//! tree) taken two ways, from 1 and 2 concurrent callers:
//! - `shared_policy`: callers are OS threads calling `select` directly, as the gateway does
//!   (the tree sits behind a short mutex, so two threads really contend for it);
//! - `mailbox`: one tokio task owns the policy and callers (tokio tasks on a 2-thread
//!   runtime) send it a message and await a oneshot reply, the "actor on the request path"
//!   design.
//!
//! Throughput is decisions per second over all callers (`iter_custom` splits the iterations
//! among them and times the wall clock until every caller is done).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{CONVERSATIONS, SYSTEM_BYTES, SYSTEM_PROMPTS, TAIL_BYTES, WORKERS, text};
use switchyard_core::WallClock;
use switchyard_core::WorkerId;
use switchyard_router::{
    CacheAwareConfig, CacheAwarePolicy, Candidate, ConsistentHashConfig, Decision, DiscardAffinity,
    RouteRequest, RoutingKeyConfig, RoutingPolicy,
};
use tokio::sync::{mpsc, oneshot};

const CALLERS: [u64; 2] = [1, 2];
/// Bounded like a real actor mailbox; deep enough that callers never wait for room.
const MAILBOX_CAPACITY: usize = 1_024;

struct Fixture {
    policy: CacheAwarePolicy,
    conversations: Vec<String>,
    candidates: Vec<Candidate>,
}

impl Fixture {
    fn decide(&self, index: usize) -> Option<Decision> {
        let request = RouteRequest {
            prompt: &self.conversations[index],
            ..Default::default()
        };
        self.policy.select(&request, &self.candidates)
    }
}

/// Same setup as `benches/cache_aware.rs`: every conversation routed once, so the tree is warm.
fn warmed_fixture() -> Arc<Fixture> {
    let mut rng = SmallRng::seed_from_u64(42);
    let policy = CacheAwarePolicy::new(
        CacheAwareConfig::default(),
        &ConsistentHashConfig::default(),
        RoutingKeyConfig::default(),
        WallClock::system(),
        Arc::new(DiscardAffinity),
    )
    .unwrap();
    for id in 0..WORKERS {
        policy.worker_added(WorkerId(id), &format!("worker-{id}"));
    }
    let candidates = (0..WORKERS)
        .map(|id| Candidate {
            id: WorkerId(id),
            in_flight: rng.random_range(0..8),
            reported: None,
        })
        .collect();
    let systems: Vec<String> = (0..SYSTEM_PROMPTS)
        .map(|_| text(&mut rng, SYSTEM_BYTES))
        .collect();
    let conversations = (0..CONVERSATIONS)
        .map(|i| {
            format!(
                "{}{}",
                systems[i % SYSTEM_PROMPTS],
                text(&mut rng, TAIL_BYTES)
            )
        })
        .collect();
    let fixture = Fixture {
        policy,
        conversations,
        candidates,
    };
    for index in 0..CONVERSATIONS {
        fixture.decide(index);
    }
    Arc::new(fixture)
}

/// The last caller takes the remainder, so the total is exactly `iters`.
fn share(iters: u64, callers: u64, caller: u64) -> u64 {
    iters / callers
        + if caller == callers - 1 {
            iters % callers
        } else {
            0
        }
}

fn shared_policy(fixture: &Arc<Fixture>, callers: u64, iters: u64) -> Duration {
    let start = Instant::now();
    std::thread::scope(|scope| {
        for caller in 0..callers {
            let fixture = Arc::clone(fixture);
            scope.spawn(move || {
                let mut rng = SmallRng::seed_from_u64(caller);
                for _ in 0..share(iters, callers, caller) {
                    black_box(fixture.decide(rng.random_range(0..CONVERSATIONS)));
                }
            });
        }
    });
    start.elapsed()
}

struct Ask {
    conversation: usize,
    reply: oneshot::Sender<Option<Decision>>,
}

/// The actor: owns the policy, answers one message at a time.
fn spawn_router_actor(
    runtime: &tokio::runtime::Runtime,
    fixture: Arc<Fixture>,
) -> mpsc::Sender<Ask> {
    let (mailbox, mut inbox) = mpsc::channel::<Ask>(MAILBOX_CAPACITY);
    runtime.spawn(async move {
        while let Some(ask) = inbox.recv().await {
            let _ = ask.reply.send(fixture.decide(ask.conversation));
        }
    });
    mailbox
}

fn mailbox(
    runtime: &tokio::runtime::Runtime,
    mailbox: &mpsc::Sender<Ask>,
    callers: u64,
    iters: u64,
) -> Duration {
    runtime.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..callers)
            .map(|caller| {
                let mailbox = mailbox.clone();
                tokio::spawn(async move {
                    let mut rng = SmallRng::seed_from_u64(caller);
                    for _ in 0..share(iters, callers, caller) {
                        let (reply, answer) = oneshot::channel();
                        let ask = Ask {
                            conversation: rng.random_range(0..CONVERSATIONS),
                            reply,
                        };
                        mailbox.send(ask).await.unwrap();
                        black_box(answer.await.unwrap());
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        start.elapsed()
    })
}

fn contention(c: &mut Criterion) {
    let fixture = warmed_fixture();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let actor = spawn_router_actor(&runtime, Arc::clone(&fixture));

    let mut group = c.benchmark_group("contention");
    group.throughput(Throughput::Elements(1));
    for callers in CALLERS {
        group.bench_function(format!("shared_policy/{callers}_threads"), |b| {
            b.iter_custom(|iters| shared_policy(&fixture, callers, iters))
        });
        group.bench_function(format!("mailbox/{callers}_callers"), |b| {
            b.iter_custom(|iters| mailbox(&runtime, &actor, callers, iters))
        });
    }
    group.finish();
}

criterion_group!(benches, contention);
criterion_main!(benches);
