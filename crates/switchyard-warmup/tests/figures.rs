//! Figures for the report: one simulated day on workers with a cold start (time-scaled by
//! tokio's paused clock, so it runs in a blink), comparing first-request latency and warmup
//! spend with no warmup, with everything kept warm (all L0), and with L0/L1/L2 tiers.
//! Run with `cargo test -p switchyard-warmup --test figures -- --nocapture` for the table.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{DAY_START_SECS, metric};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{Clock, WallClock};
use switchyard_warmup::{
    PeakWindow, ResourceConfig, ResourceKind, Tier, WarmupConfig, WarmupError, WarmupExecutor,
    WarmupManager, WarmupOptions, WarmupOutcome, WarmupResource,
};
use tokio::time::Instant;

const COLD: Duration = Duration::from_secs(8);
const WARM: Duration = Duration::from_millis(800);
/// An instance stays warm this long after it last served anything.
const KEEP_WARM: Duration = Duration::from_secs(40 * 60);
const WARMUP_TOKENS: u64 = 1_200;

/// Tokio's clock: paused in this test, so simulated hours pass instantly.
struct TokioClock;

impl Clock for TokioClock {
    fn now(&self) -> std::time::Instant {
        Instant::now().into_std()
    }
}

#[derive(Default)]
struct World {
    last_active: Mutex<HashMap<String, Instant>>,
}

impl World {
    async fn serve(&self, name: &str) {
        let started = Instant::now();
        let cold = self
            .last_active
            .lock()
            .get(name)
            .is_none_or(|at| started.duration_since(*at) > KEEP_WARM);
        tokio::time::sleep(if cold { COLD } else { WARM }).await;
        self.last_active
            .lock()
            .insert(name.to_string(), Instant::now());
    }
}

struct SimExecutor(Arc<World>);

impl WarmupExecutor for SimExecutor {
    async fn warm(&self, resource: &WarmupResource) -> Result<WarmupOutcome, WarmupError> {
        self.0.serve(&resource.name).await;
        Ok(WarmupOutcome {
            landed_on: Some(resource.name.to_string()),
            business_reachable: vec![resource.name.to_string()],
            tokens_spent: WARMUP_TOKENS,
        })
    }
}

/// Deterministic xorshift, so every strategy sees the same day.
struct Rng(u64);

impl Rng {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound.max(1)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.below(high - low)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Class {
    Core,
    Peak,
    Tail,
}

fn resources() -> Vec<(String, Class)> {
    let mut all = Vec::new();
    all.extend((0..4).map(|i| (format!("core{i}"), Class::Core)));
    all.extend((0..6).map(|i| (format!("peak{i}"), Class::Peak)));
    all.extend((0..10).map(|i| (format!("tail{i}"), Class::Tail)));
    all
}

/// (second of the day, resource, first request of its burst). Bursts are 3 requests 20 s
/// apart: core all day with 15–45 min gaps, peak inside 09:00–11:00 with 10–30 min gaps,
/// tail once a day.
fn traffic() -> Vec<(u64, String, bool)> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut events = Vec::new();
    let burst = |events: &mut Vec<(u64, String, bool)>, at: u64, name: &str| {
        for k in 0..3 {
            events.push((at + k * 20, name.to_string(), k == 0));
        }
    };
    for (name, class) in resources() {
        match class {
            Class::Core => {
                let mut at = rng.below(1_800);
                while at < 86_000 {
                    burst(&mut events, at, &name);
                    at += rng.between(15 * 60, 45 * 60);
                }
            }
            Class::Peak => {
                let mut at = 9 * 3_600 + rng.below(600);
                while at < 11 * 3_600 {
                    burst(&mut events, at, &name);
                    at += rng.between(10 * 60, 30 * 60);
                }
            }
            Class::Tail => burst(&mut events, rng.below(86_000), &name),
        }
    }
    events.sort();
    events
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Strategy {
    None,
    Everything,
    Tiers,
}

fn warmup_config(strategy: Strategy) -> WarmupConfig {
    let mut config = WarmupConfig {
        tick_interval_ms: 0,
        ..Default::default()
    };
    config.budget.total_quota = 100_000_000;
    config.ramp.steady_p95_ms = 1_000;
    if strategy == Strategy::None {
        return config;
    }
    for (name, class) in resources() {
        let tier = match (strategy, class) {
            (Strategy::Everything, _) | (_, Class::Core) => Tier::L0,
            (_, Class::Peak) => Tier::L1,
            (_, Class::Tail) => Tier::L2,
        };
        let mut resource = ResourceConfig::new(name, ResourceKind::Instance, tier);
        resource.target.model = Some("m".into());
        resource.estimated_cost_tokens = WARMUP_TOKENS;
        if tier == Tier::L1 {
            resource.peak_windows = vec![PeakWindow::try_from("09:00-11:00".to_string()).unwrap()];
        }
        config.resources.push(resource);
    }
    config
}

struct Outcome {
    first_ms: Vec<u64>,
    cold_firsts: usize,
    warmups: f64,
    tokens: u64,
}

async fn simulate(strategy: Strategy) -> Outcome {
    let world = Arc::new(World::default());
    let wall = WallClock::new(Arc::new(TokioClock), Duration::from_secs(DAY_START_SECS));
    let registry = prometheus::Registry::new();
    let options = WarmupOptions {
        clock: wall,
        ..Default::default()
    };
    let executor = Arc::new(SimExecutor(world.clone()));
    let (manager, _join) =
        WarmupManager::start(warmup_config(strategy), executor, options, &registry)
            .await
            .unwrap();
    let start = Instant::now();
    let firsts = Arc::new(Mutex::new(Vec::new()));
    let mut requests = tokio::task::JoinSet::new();
    let mut events = traffic().into_iter().peekable();
    for minute in 0..1_440u64 {
        tokio::time::sleep_until(start + Duration::from_secs(minute * 60)).await;
        manager.tick().await.unwrap();
        while let Some((at, name, first)) = events.next_if(|(at, _, _)| *at < (minute + 1) * 60) {
            tokio::time::sleep_until(start + Duration::from_secs(at)).await;
            let (manager, world, firsts) = (manager.clone(), world.clone(), firsts.clone());
            requests.spawn(async move {
                let began = Instant::now();
                if name.starts_with("tail") {
                    manager.lazy_warm(&name).await; // a no-op unless the resource is L2
                }
                world.serve(&name).await;
                let latency = began.elapsed();
                manager.note_use(&name, first.then_some(latency));
                if first {
                    firsts.lock().push(latency.as_millis() as u64);
                }
            });
        }
    }
    while requests.join_next().await.is_some() {}
    manager.wait_idle().await;
    let mut first_ms = firsts.lock().clone();
    first_ms.sort_unstable();
    let warmups = metric(
        &registry,
        "switchyard_warmup_runs_total",
        &[("result", "warmed")],
    );
    let tokens = manager.report().period_spent_tokens;
    manager.stop();
    Outcome {
        cold_firsts: first_ms
            .iter()
            .filter(|&&ms| ms >= COLD.as_millis() as u64)
            .count(),
        first_ms,
        warmups,
        tokens,
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    let rank = ((sorted.len() as f64) * p).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[tokio::test(start_paused = true)]
async fn tiers_keep_first_requests_fast_for_a_fraction_of_the_spend() {
    let none = simulate(Strategy::None).await;
    let everything = simulate(Strategy::Everything).await;
    let tiers = simulate(Strategy::Tiers).await;
    println!("strategy     first reqs  cold  p50 ms  p95 ms  p99 ms  warmups  tokens");
    for (label, o) in [
        ("none", &none),
        ("everything", &everything),
        ("tiers", &tiers),
    ] {
        println!(
            "{label:<12} {:>10}  {:>4}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}",
            o.first_ms.len(),
            o.cold_firsts,
            percentile(&o.first_ms, 0.50),
            percentile(&o.first_ms, 0.95),
            percentile(&o.first_ms, 0.99),
            o.warmups as u64,
            o.tokens,
        );
    }
    let saved = 1.0 - tiers.tokens as f64 / everything.tokens as f64;
    println!(
        "tiers spend {:.0} % less than warming everything",
        saved * 100.0
    );
    assert!(percentile(&none.first_ms, 0.95) >= COLD.as_millis() as u64);
    assert!(percentile(&tiers.first_ms, 0.95) < COLD.as_millis() as u64);
    assert_eq!(
        percentile(&tiers.first_ms, 0.95),
        percentile(&everything.first_ms, 0.95)
    );
    assert!(
        saved > 0.5,
        "tiers must spend far less than warming everything"
    );
}
