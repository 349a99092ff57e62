//! The warmup manager's public face. Scheduling (L0 keep-alives, L1 peaks, waves and their
//! ramp) happens in the actor (`actor.rs`); lazy L2 warmups, `note_use` and `note_spend`
//! run on the caller's task against shared state, lock-free except the singleflight map.

mod actor;
mod report;
mod shared;
mod steady;
mod wave;

use arc_swap::{ArcSwap, ArcSwapOption};
use ractor::{Actor, ActorRef, RpcReplyPort};
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::Purpose;
use switchyard_router::RoutingKeyConfig;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::warn;

pub use report::{LazyWarm, ResourceReport, TickReport, WarmupReport, WaveStatus};
pub use steady::{LatencyHistogram, SteadyP95, SteadySource};

use crate::accounting::{self, Books};
use crate::budget::{PlanInputs, PlanReport, plan, warmup_budget};
use crate::clock::secs_to_ms;
use crate::config::{Tier, WarmupConfig};
use crate::error::ManagerError;
use crate::executor::WarmupExecutor;
use crate::metrics::WarmupMetrics;
use crate::schedule::WarmupLimits;
use crate::singleflight::Flight;
use actor::{ManagerActor, ManagerMsg};
use shared::{Core, ResourceTable, demotion_target};
use switchyard_core::WallClock;

const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// What the manager needs besides its config and executor.
#[derive(Clone, Debug)]
pub struct WarmupOptions {
    pub clock: WallClock,
    /// The gateway's `[routing.routing_key]`: warmup keys must be computed exactly as
    /// business keys are.
    pub routing_key: RoutingKeyConfig,
}

impl Default for WarmupOptions {
    fn default() -> Self {
        Self {
            clock: WallClock::system(),
            routing_key: RoutingKeyConfig::default(),
        }
    }
}

/// Cheap, cloneable handle to the warmup manager.
#[derive(Clone)]
pub struct WarmupManager {
    core: Arc<Core>,
    actor: ActorRef<ManagerMsg>,
}

impl WarmupManager {
    /// Validates the config, registers the `switchyard_warmup_*` metrics and starts the
    /// manager actor. The join handle ends after [`WarmupManager::stop`].
    pub async fn start<E: WarmupExecutor>(
        config: WarmupConfig,
        executor: Arc<E>,
        options: WarmupOptions,
        registry: &prometheus::Registry,
    ) -> Result<(Self, JoinHandle<()>), ManagerError> {
        config.validate()?;
        for warning in config.warnings() {
            warn!("{warning}");
        }
        let metrics = WarmupMetrics::new(registry)?;
        let now = options.clock.unix_millis();
        let table = ResourceTable::build(&config, &options.routing_key, None);
        let core = Arc::new(Core {
            books: Books::new(secs_to_ms(config.budget.period_secs), now),
            clock: options.clock,
            executor,
            keys: options.routing_key,
            table: ArcSwap::from_pointee(table),
            config: ArcSwap::from_pointee(config),
            limits: ArcSwap::from_pointee(WarmupLimits::ALL),
            metrics,
            lazy: Default::default(),
            wave: ArcSwapOption::empty(),
            busy: watch::channel(0).0,
        });
        let (actor, join) = Actor::spawn(None, ManagerActor, Arc::clone(&core))
            .await
            .map_err(|e| ManagerError::Unavailable(e.to_string()))?;
        let manager = Self { core, actor };
        manager.refresh_plan_gauges();
        Ok((manager, join))
    }

    /// Runs one scheduling pass now: queue due warmups, judge the ramp window, start what the
    /// ramp allows. With `tick_interval_ms = 0` this is the only way the schedule moves.
    pub async fn tick(&self) -> Result<TickReport, ManagerError> {
        let report = self.call(|reply| ManagerMsg::Tick(Some(reply))).await?;
        self.refresh_plan_gauges();
        Ok(report)
    }

    /// Applies degradation's warmup limits; returns once the manager has applied them
    /// (queued warmups of tiers no longer allowed are dropped).
    pub async fn set_limits(&self, limits: WarmupLimits) -> Result<(), ManagerError> {
        self.call(|reply| ManagerMsg::SetLimits(limits, reply))
            .await?;
        self.refresh_plan_gauges();
        Ok(())
    }

    pub fn limits(&self) -> WarmupLimits {
        **self.core.limits.load()
    }

    /// Swaps the config; resources that keep their name keep their state.
    pub async fn reload(&self, config: WarmupConfig) -> Result<(), ManagerError> {
        self.call(|reply| ManagerMsg::Reload(Box::new(config), reply))
            .await?
            .map_err(ManagerError::Config)?;
        self.refresh_plan_gauges();
        Ok(())
    }

    /// The owner's cumulative histogram of business-request latency (warmups excluded),
    /// reported every few seconds. A wave's steady p95 is the p95 of the requests between
    /// the newest report and the one `warmup.ramp.steady_window_secs` earlier; with fewer
    /// than `steady_min_samples` of them, or no recent report, `steady_p95_ms` is used.
    pub fn observe_business_latency(&self, histogram: LatencyHistogram) {
        // Stamped here, not when the actor gets to it: the window is about when it was read.
        let now = self.core.clock.unix_millis();
        let _ = self
            .actor
            .send_message(ManagerMsg::BusinessLatency(now, histogram));
    }

    /// Request path: called when a request needs the L2 resource `name`. Warm → returns at
    /// once. Cold → exactly one warmup runs however many requests ask at the same time; the
    /// others wait for it.
    pub async fn lazy_warm(&self, name: &str) -> LazyWarm {
        let outcome = self.lazy_warm_inner(name).await;
        self.core
            .metrics
            .lazy
            .with_label_values(&[outcome.label()])
            .inc();
        outcome
    }

    async fn lazy_warm_inner(&self, name: &str) -> LazyWarm {
        let core = &self.core;
        let Some(cell) = core.table.load().get(name).cloned() else {
            return LazyWarm::Unknown;
        };
        if cell.resource.tier != Tier::L2 {
            return LazyWarm::NotLazy;
        }
        if !core.config.load().enabled || !core.limits.load().lazy {
            return LazyWarm::Disabled;
        }
        let cold_after = secs_to_ms(core.config.load().cold_after_secs);
        if cell.is_warm(core.clock.unix_millis(), cold_after) {
            return LazyWarm::AlreadyWarm;
        }
        let key = Arc::clone(&cell.resource.name);
        match core.lazy.run(&key, || core.run(&cell)).await {
            Flight::Led(result) => LazyWarm::Led(result),
            Flight::Joined(result) => LazyWarm::Joined(result),
        }
    }

    /// Request path: real traffic used resource `name`. Judges the warmup hit (used within
    /// the hit window) and records `first_request_latency`, when given, as a warmed or cold
    /// first request.
    pub fn note_use(&self, name: &str, first_request_latency: Option<Duration>) {
        let core = &self.core;
        let Some(cell) = core.table.load().get(name).cloned() else {
            return;
        };
        let config = core.config.load();
        let class = accounting::note_use(
            &cell,
            core.clock.unix_millis(),
            secs_to_ms(config.hit_window_secs),
            secs_to_ms(config.cold_after_secs),
        );
        if class.hit {
            core.metrics.hits.inc();
        }
        let state = if class.first_after_warmup {
            "warmed"
        } else if class.cold {
            "cold"
        } else {
            return;
        };
        if let Some(latency) = first_request_latency {
            core.metrics
                .first_request
                .with_label_values(&[state])
                .observe(latency.as_secs_f64());
        }
    }

    /// Request path: tokens a settled request spent. Warmup spend is counted from the
    /// executor's outcomes, so `Purpose::Warmup` is ignored here.
    pub fn note_spend(&self, purpose: Purpose, tokens: u64) {
        if purpose != Purpose::Warmup {
            self.core
                .books
                .note_traffic(tokens, self.core.clock.unix_millis());
            self.core.metrics.traffic_tokens.inc_by(tokens);
        }
    }

    /// Total requests / first attempts, from the gateway's counters (multiplies the
    /// effective warmup cost).
    pub fn note_retry_amplification(&self, total_requests: u64, first_attempts: u64) {
        if first_attempts > 0 {
            self.core
                .books
                .set_retry_amplification(total_requests as f64 / first_attempts as f64);
        }
    }

    /// Resources a business request uses (for `note_use` and `lazy_warm`).
    pub fn resources_for(&self, model: &str, prompt: &str, worker: Option<&str>) -> Vec<Arc<str>> {
        self.core
            .table
            .load()
            .cells()
            .filter(|cell| cell.resource.used_by(model, prompt, worker))
            .map(|cell| Arc::clone(&cell.resource.name))
            .collect()
    }

    pub fn is_warm(&self, name: &str) -> Option<bool> {
        let core = &self.core;
        let cold_after = secs_to_ms(core.config.load().cold_after_secs);
        let now = core.clock.unix_millis();
        core.table
            .load()
            .get(name)
            .map(|cell| cell.is_warm(now, cold_after))
    }

    /// The scheduled plan against the budget at the current limits and measured costs.
    pub fn plan(&self) -> PlanReport {
        let config = self.core.config.load();
        let inputs = PlanInputs {
            mean_cost_tokens: self.core.mean_cost(),
            retry_amplification: self.core.books.retry_amplification(),
            scheduled_frequency: self.limits().scheduled_frequency,
        };
        plan(&config.budget, &config.resources, inputs)
    }

    pub fn report(&self) -> WarmupReport {
        let core = &self.core;
        let config = core.config.load();
        let now = core.clock.unix_millis();
        let cold_after = secs_to_ms(config.cold_after_secs);
        let table = core.table.load();
        let resources: Vec<ResourceReport> = table
            .cells()
            .map(|cell| {
                let load = |a: &std::sync::atomic::AtomicU64| {
                    Some(a.load(std::sync::atomic::Ordering::Acquire)).filter(|&v| v != 0)
                };
                ResourceReport {
                    name: Arc::clone(&cell.resource.name),
                    kind: cell.resource.kind,
                    tier: cell.resource.tier,
                    warm: cell.is_warm(now, cold_after),
                    last_warmed_unix_ms: load(&cell.last_warmed),
                    last_used_unix_ms: load(&cell.last_used),
                    hits: load(&cell.hits).unwrap_or(0),
                    misses: load(&cell.misses).unwrap_or(0),
                    hit_rate: cell.hit_rate(1),
                    demotion_candidate: demotion_target(cell, &config),
                }
            })
            .collect();
        let (hits, misses) = resources
            .iter()
            .fold((0, 0), |(h, m), r| (h + r.hits, m + r.misses));
        WarmupReport {
            enabled: config.enabled,
            limits: self.limits(),
            plan: self.plan(),
            period_spent_tokens: core.books.warmup_spent(),
            cost_ratio: core.books.cost_ratio(),
            hit_rate: (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64),
            retry_amplification: core.books.retry_amplification(),
            wave: core.wave.load_full().map(|wave| (*wave).clone()),
            resources,
        }
    }

    /// Waits until no scheduled warmup is queued or running.
    pub async fn wait_idle(&self) {
        let mut busy = self.core.busy.subscribe();
        let _ = busy.wait_for(|&count| count == 0).await;
    }

    /// Stops the actor; running scheduled warmups are aborted.
    pub fn stop(&self) {
        self.actor.stop(None);
    }

    fn refresh_plan_gauges(&self) {
        let plan = self.plan();
        let metrics = &self.core.metrics;
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        metrics
            .budget_tokens
            .set(clamp(warmup_budget(&self.core.config.load().budget)));
        metrics.max_warmups.set(clamp(plan.max_warmups));
        metrics.planned_warmups.set(clamp(plan.planned_warmups));
        metrics.plan_fits.set(i64::from(plan.fits));
    }

    async fn call<T: Send + 'static>(
        &self,
        message: impl FnOnce(RpcReplyPort<T>) -> ManagerMsg,
    ) -> Result<T, ManagerError> {
        match self.actor.call(message, Some(CALL_TIMEOUT)).await {
            Ok(ractor::rpc::CallResult::Success(value)) => Ok(value),
            Ok(_) => Err(ManagerError::Unavailable("call timed out".into())),
            Err(error) => Err(ManagerError::Unavailable(error.to_string())),
        }
    }
}
