//! Replays the load tool's request sequence through real routing policies, offline: several
//! gateway replicas, each request to one at random, each replica seeing only its own in-flight
//! counts, every worker's prefix cache modelled by the simulator's KV replay. Says where cache
//! hits are lost (turns that leave their conversation's worker, conversations split across
//! workers, evictions on the right worker) and how many conversations a membership change or a
//! replica restart moves. Each answer is the simulator's and is back before the next
//! request (the load tool's client waits for it; here it never has to wait).
//!
//! cargo run -p switchyard-router --example fleet_replay -- --replicas 3 --mode independent \
//!     --workload agentic --seed 1 --requests 3600 --kv-blocks 1900
//!
//! Options: --policy NAME, --routing JSON (a `[routing]` section as JSON), --mode
//! independent|shared (affinity events applied by every replica), --event leave|join|restart
//! (at the midpoint), --rate, --workers. Prints one JSON object.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use switchyard_core::WallClock;
use switchyard_core::{ManualClock, WorkerId};
use switchyard_load::{Workload, WorkloadGenerator};
use switchyard_router::{
    AffinityEvent, AffinitySink, Candidate, PolicyContext, RouteRequest, RoutingConfig,
    RoutingPolicy, build_policy,
};
use switchyard_sim::{ChatBlocks, KvReplay, simulated_answer};

/// The simulator's defaults: prefill per 1000 uncached tokens, decode of the load tool's 32
/// output tokens, batch size.
const ANSWER_TOKENS: usize = 32;
const PREFILL_SECS_PER_1K: f64 = 0.040;
const DECODE_SECS: f64 = 31.0 * 0.005;
const MAX_RUNNING: usize = 8;

#[derive(Default)]
struct Recorder(Mutex<Vec<AffinityEvent>>);

impl AffinitySink for Recorder {
    fn publish(&self, event: AffinityEvent) {
        self.0.lock().push(event);
    }
}

struct Options {
    policy: String,
    routing: Option<String>,
    replicas: usize,
    shared: bool,
    workload: Workload,
    seed: u64,
    requests: usize,
    rate: f64,
    workers: usize,
    kv_blocks: usize,
    event: Option<String>,
    /// `system`: no policy; every conversation pinned to its system prompt's worker (a new
    /// prompt to the worker with the fewest prompts, then the fewest requests): the
    /// sticky-by-system-prompt oracle.
    pin: Option<String>,
}

fn options() -> Options {
    let mut options = Options {
        policy: "cache_aware".into(),
        routing: None,
        replicas: 1,
        shared: false,
        workload: Workload::Agentic,
        seed: 1,
        requests: 3600,
        rate: 60.0,
        workers: 4,
        kv_blocks: 1900,
        event: None,
        pin: None,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--policy" => options.policy = value,
            "--routing" => options.routing = Some(value),
            "--replicas" => options.replicas = value.parse().unwrap_or(1),
            "--mode" => options.shared = value == "shared",
            "--workload" => {
                options.workload = match value.as_str() {
                    "agentic-keyed" => Workload::AgenticKeyed,
                    _ => Workload::Agentic,
                }
            }
            "--seed" => options.seed = value.parse().unwrap_or(1),
            "--requests" => options.requests = value.parse().unwrap_or(3600),
            "--rate" => options.rate = value.parse().unwrap_or(60.0),
            "--workers" => options.workers = value.parse().unwrap_or(4),
            "--kv-blocks" => options.kv_blocks = value.parse().unwrap_or(1900),
            "--event" => options.event = Some(value),
            "--pin" => options.pin = Some(value),
            other => eprintln!("ignored option {other}"),
        }
    }
    options
}

/// As the gateway flattens chat messages for routing.
fn flatten(messages: &[switchyard_load::ChatMessage]) -> String {
    messages
        .iter()
        .map(|m| format!("<|{}|>{}\n", m.role, m.content))
        .collect()
}

struct Replica {
    policy: Arc<dyn RoutingPolicy>,
    /// Worker index → this replica's id for it.
    ids: Vec<WorkerId>,
}

fn replica(
    options: &Options,
    index: usize,
    clock: &WallClock,
    sink: Arc<Recorder>,
) -> Result<Replica, String> {
    let mut config: RoutingConfig = match &options.routing {
        Some(json) => serde_json::from_str(json).map_err(|e| format!("--routing: {e}"))?,
        None => RoutingConfig::default(),
    };
    config.policy = options.policy.clone();
    let policy = build_policy(
        &config,
        PolicyContext {
            clock: clock.clone(),
            affinity_sink: sink,
        },
    )
    .map_err(|e| e.to_string())?;
    let ids = (0..options.workers + 1)
        .map(|w| WorkerId((index * 100 + w) as u32 + 1))
        .collect::<Vec<_>>();
    // Registered in a replica-specific order, as registries do.
    for w in (0..options.workers).rev() {
        policy.worker_added(ids[w], &format!("sim-{w}"));
    }
    Ok(Replica { policy, ids })
}

/// One worker's batch: finish times of the requests it runs.
#[derive(Default)]
struct Worker {
    finishing: Vec<(f64, usize)>,
}

fn main() -> Result<(), String> {
    let options = options();
    let manual = Arc::new(ManualClock::new());
    let clock = WallClock::new(manual.clone(), Duration::from_secs(1_700_000_000));
    let recorder = Arc::new(Recorder::default());
    let mut replicas: Vec<Replica> = (0..options.replicas)
        .map(|r| replica(&options, r, &clock, recorder.clone()))
        .collect::<Result<_, _>>()?;
    let mut live_workers: Vec<usize> = (0..options.workers).collect();
    let max_workers = options.workers + 1;
    let mut caches: Vec<KvReplay> = (0..max_workers)
        .map(|_| KvReplay::new(options.kv_blocks))
        .collect();
    let mut batches: Vec<Worker> = (0..max_workers).map(|_| Worker::default()).collect();
    let mut generator = WorkloadGenerator::new(options.workload, options.seed);
    let mut rng = SmallRng::seed_from_u64(options.seed ^ 0x5eed);

    let mut conversation_of: HashMap<(String, String), usize> = HashMap::new();
    let mut last_worker: Vec<usize> = Vec::new();
    let mut workers_used: Vec<Vec<usize>> = Vec::new();
    // Replicas that served a turn of each conversation, and later turns that left their
    // worker on a replica that had never seen the conversation.
    let mut replicas_seen: Vec<Vec<usize>> = Vec::new();
    let mut left_home_unseen = 0u64;
    let (mut prompt_tokens, mut cached_tokens) = (0u64, 0u64);
    let (mut later_turns, mut left_home, mut evicted_tokens) = (0u64, 0u64, 0u64);
    let mut served = vec![0u64; max_workers];
    let mut evicted_by_worker = vec![0u64; max_workers];
    let mut tokens_by_worker = vec![0u64; max_workers];
    let mut ttfts: Vec<f64> = Vec::new();
    let mut branches: HashMap<&'static str, u64> = HashMap::new();
    let mut now = 0.0f64;
    let midpoint = options.requests / 2;
    let mut homes_at_event: Option<HashMap<usize, usize>> = None;
    let (mut moved_checked, mut moved) = (0u64, 0u64);
    // Checked conversations whose worker left at the event: they had to move.
    let mut moved_forced = 0u64;
    let mut departed: Option<usize> = None;
    let mut previous_blocks: Vec<usize> = Vec::new();
    // Request index of each conversation's first turn, to see when split ones started.
    let mut started_at: Vec<usize> = Vec::new();
    // System prompt → worker, for `--pin system`.
    let mut pinned: HashMap<String, usize> = HashMap::new();

    for index in 0..options.requests {
        let gap: f64 = -(1.0 - rng.random::<f64>()).ln() / options.rate;
        now += gap;
        manual.advance(Duration::from_secs_f64(gap));
        if index == midpoint {
            if let Some(event) = &options.event {
                homes_at_event = Some(
                    last_worker
                        .iter()
                        .enumerate()
                        .map(|(c, &w)| (c, w))
                        .collect(),
                );
                match event.as_str() {
                    "leave" => {
                        let gone = live_workers.pop().unwrap_or(0);
                        departed = Some(gone);
                        for r in &replicas {
                            r.policy.worker_removed(r.ids[gone]);
                        }
                    }
                    "join" => {
                        live_workers.push(options.workers);
                        for r in &replicas {
                            r.policy.worker_added(
                                r.ids[options.workers],
                                &format!("sim-{}", options.workers),
                            );
                        }
                    }
                    _ => replicas[0] = replica(&options, 0, &clock, recorder.clone())?,
                }
            }
        }
        let planned = generator.next_request();
        let opening = (
            planned.messages[0].content.clone(),
            planned
                .messages
                .get(1)
                .map(|m| m.content.clone())
                .unwrap_or_default(),
        );
        let next = conversation_of.len();
        let conversation = *conversation_of.entry(opening).or_insert(next);
        let first_turn = conversation == last_worker.len();
        if first_turn {
            started_at.push(index);
            last_worker.push(usize::MAX);
            workers_used.push(Vec::new());
            replicas_seen.push(Vec::new());
            previous_blocks.push(0);
        }
        let prompt = flatten(&planned.messages);
        let messages = || {
            planned
                .messages
                .iter()
                .map(|m| (m.role, m.content.as_str()))
        };
        let answer = simulated_answer(messages(), ANSWER_TOKENS);
        let blocks = ChatBlocks::answered(messages(), Some(&answer));
        if let Some(ticket) = planned.turn {
            generator.record_answer(ticket, Some(&answer));
        }
        let r = if options.event.as_deref() == Some("restart") && index >= midpoint {
            // After a restart, measure what the fresh replica does.
            if index < midpoint + 400 {
                0
            } else {
                rng.random_range(0..replicas.len())
            }
        } else {
            rng.random_range(0..replicas.len())
        };
        let replica = &replicas[r];
        for batch in batches.iter_mut() {
            batch.finishing.retain(|&(finish, _)| finish > now);
        }
        let candidates: Vec<Candidate> = live_workers
            .iter()
            .map(|&w| Candidate {
                id: replica.ids[w],
                in_flight: batches[w]
                    .finishing
                    .iter()
                    .filter(|(_, by)| *by == r)
                    .count() as u64,
                reported: None,
            })
            .collect();
        let request = RouteRequest {
            prompt: &prompt,
            session_id: planned.session_id.as_deref(),
            user: planned.user.as_deref(),
        };
        let (worker, branch) = if options.pin.as_deref() == Some("system") {
            let system = planned.messages[0].content.clone();
            let next = *live_workers
                .iter()
                .min_by_key(|&&w| (pinned.values().filter(|&&p| p == w).count(), served[w]))
                .ok_or("no worker")?;
            (
                *pinned.entry(system).or_insert(next),
                "pinned_by_system_prompt",
            )
        } else {
            let decision = replica
                .policy
                .select(&request, &candidates)
                .ok_or("no decision")?;
            let worker = replica
                .ids
                .iter()
                .position(|&id| id == decision.worker)
                .ok_or("an unknown worker")?;
            (worker, decision.branch)
        };
        *branches.entry(branch).or_insert(0) += 1;
        if options.shared {
            for event in std::mem::take(&mut *recorder.0.lock()) {
                for other in &replicas {
                    other.policy.apply_affinity(&event);
                }
            }
        } else {
            recorder.0.lock().clear();
        }
        if let Some(homes) = &homes_at_event {
            if let Some(&home) = homes.get(&conversation) {
                // A conversation whose worker left counts as moved: it had to.
                if !first_turn {
                    moved_checked += 1;
                    moved += u64::from(worker != home);
                    moved_forced += u64::from(departed == Some(home));
                }
            }
        }
        if let Some(homes) = homes_at_event.as_mut() {
            homes.remove(&conversation);
        }
        let cached = caches[worker].serve(&blocks);
        if !first_turn {
            later_turns += 1;
            if last_worker[conversation] != worker {
                left_home += 1;
                left_home_unseen += u64::from(!replicas_seen[conversation].contains(&r));
                if std::env::var_os("FLEET_REPLAY_DEBUG").is_some() {
                    eprintln!(
                        "moved conv {conversation} at {index} by replica {r}: {} -> {worker} via {}",
                        last_worker[conversation], branch
                    );
                }
            } else {
                let expected = previous_blocks[conversation] * switchyard_sim::BLOCK_TOKENS;
                evicted_tokens += expected.saturating_sub(cached) as u64;
                evicted_by_worker[worker] += expected.saturating_sub(cached) as u64;
            }
        }
        previous_blocks[conversation] = blocks.computed.len();
        last_worker[conversation] = worker;
        if !replicas_seen[conversation].contains(&r) {
            replicas_seen[conversation].push(r);
        }
        if !workers_used[conversation].contains(&worker) {
            workers_used[conversation].push(worker);
        }
        prompt_tokens += blocks.prompt_tokens as u64;
        cached_tokens += cached as u64;
        served[worker] += 1;
        tokens_by_worker[worker] += blocks.prompt_tokens as u64;
        let batch = &mut batches[worker];
        let mut finishes: Vec<f64> = batch.finishing.iter().map(|(f, _)| *f).collect();
        finishes.sort_by(f64::total_cmp);
        let start = if finishes.len() < MAX_RUNNING {
            now
        } else {
            finishes[finishes.len() - MAX_RUNNING]
        };
        let prefill = (blocks.prompt_tokens - cached) as f64 / 1000.0 * PREFILL_SECS_PER_1K;
        ttfts.push(start - now + prefill);
        batch.finishing.push((start + prefill + DECODE_SECS, r));
    }
    ttfts.sort_by(f64::total_cmp);
    let p99 = ttfts
        .get(((ttfts.len() as f64) * 0.99) as usize)
        .copied()
        .unwrap_or(0.0);
    let counts: Vec<u64> = live_workers.iter().map(|&w| served[w]).collect();
    let split = workers_used.iter().filter(|used| used.len() > 1).count();
    let mut split_by_start_decile = [0u64; 10];
    for (used, &start) in workers_used.iter().zip(&started_at) {
        if used.len() > 1 {
            split_by_start_decile[(start * 10 / options.requests.max(1)).min(9)] += 1;
        }
    }
    let report = serde_json::json!({
        "policy": options.policy,
        "replicas": options.replicas,
        "mode": if options.shared { "shared" } else { "independent" },
        "workload": format!("{:?}", options.workload),
        "seed": options.seed,
        "requests": options.requests,
        "kv_blocks": options.kv_blocks,
        "hit_rate": cached_tokens as f64 / prompt_tokens.max(1) as f64,
        "load_cv": switchyard_load::coefficient_of_variation(&counts),
        "served": counts,
        "ttft_p99_ms": p99 * 1000.0,
        "conversations": last_worker.len(),
        "split_conversations": split as f64 / last_worker.len().max(1) as f64,
        "split_by_start_decile": split_by_start_decile,
        "later_turns_off_previous_worker": left_home as f64 / later_turns.max(1) as f64,
        "later_turns_off_on_unseen_replica": left_home_unseen as f64 / later_turns.max(1) as f64,
        "tokens_evicted_on_same_worker_share": evicted_tokens as f64 / prompt_tokens.max(1) as f64,
        "event": options.event,
        "moved_share": if moved_checked > 0 { Some(moved as f64 / moved_checked as f64) } else { None },
        "moved_checked": moved_checked,
        "moved_forced": moved_forced,
        // Each replica's own estimate of the traffic share its re-plan on the event moved
        // between workers that stayed.
        "plan_moved_beyond_event": replicas
            .iter()
            .map(|r| r.policy.stats().plan_moved_beyond_membership_change)
            .collect::<Vec<f64>>(),
        "branches": branches,
        "evicted_by_worker": evicted_by_worker,
        "tokens_by_worker": tokens_by_worker,
    });
    println!("{report}");
    Ok(())
}
