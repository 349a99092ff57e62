//! Warmup and graded degradation in the running gateway (issue 7), on top of
//! `switchyard-warmup`:
//!
//! - `executor`: the [`WarmupExecutor`] that sends every warmup through the gateway's own
//!   front door (admission with the warmup tags, prefilters, the routing policy with the same
//!   routing-key inputs as business traffic, retries, metering) and reports where it landed;
//! - `actions`: the [`switchyard_warmup::ActionExecutor`] that makes a degradation level real
//!   (warmup limits, admission capacity, caller policy, serve mode) or fails loudly;
//! - `evaluator`: the owned once-a-second task feeding the controller its signals, and the
//!   config follower that hot-reloads both;
//! - `front`: the request path's part — the degradation verdict after identity, the model
//!   downgrade chain, the cache fallback, lazy (L2) warmup and `note_use`/`note_spend`.

mod actions;
mod business_latency;
mod evaluator;
mod executor;
pub(crate) mod front;
mod landings;
mod request_text;

use arc_swap::Guard;
use prometheus::{IntCounterVec, Opts};
use std::sync::{Arc, OnceLock, Weak};
use switchyard_router::RoutingKeyConfig;
use switchyard_warmup::downgrade::DowngradeMetrics;
use switchyard_warmup::{
    DegradationController, DegradationError, ManagerError, ResponseCache, ViewReader, WallClock,
    WarmupManager, WarmupOptions,
};
use switchyard_workers::Routability;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::reload::Reconfigure;
use crate::state::AppState;

pub use evaluator::{evaluate_once, signals};
pub use landings::{Landing, Landings};

/// The gateway's state, once it exists: warmups and actions reach the request stack
/// through it (weakly: the state owns the manager that owns the executor).
pub(crate) type StateSlot = Arc<OnceLock<Weak<AppState>>>;

#[derive(Debug, thiserror::Error)]
pub enum WarmupStartError {
    #[error(transparent)]
    Manager(#[from] ManagerError),
    #[error(transparent)]
    Degradation(#[from] DegradationError),
    #[error("warmup metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// What the request path and the admin API use; cheap to clone.
#[derive(Clone)]
pub struct WarmupRuntime {
    pub manager: WarmupManager,
    pub controller: Arc<DegradationController>,
    /// The hot-path read of the level in force.
    pub view: ViewReader,
    pub cache: Arc<ResponseCache>,
    /// Where each resource's last warmup landed.
    pub landings: Arc<Landings>,
    /// Warmup requests' TTFTs, taken out of the business latency the ramp compares with.
    pub(crate) warmup_ttfts: Arc<business_latency::WarmupTtfts>,
    pub(crate) metrics: Arc<FrontMetrics>,
}

/// Request-path decisions of this module, one counter per branch.
pub(crate) struct FrontMetrics {
    pub(crate) verdicts: IntCounterVec,
    pub(crate) downgrades: DowngradeMetrics,
    pub(crate) cache_fills: IntCounterVec,
}

impl FrontMetrics {
    fn new(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let verdicts = IntCounterVec::new(
            Opts::new(
                "switchyard_degradation_verdicts_total",
                "Degradation verdicts on business requests (serve, serve_at, cached_or_warmed_only, fallback).",
            ),
            &["verdict"],
        )?;
        let cache_fills = IntCounterVec::new(
            Opts::new(
                "switchyard_degradation_cache_fills_total",
                "Successful non-streaming answers offered to the response cache, by outcome \
                 (stored, not_captured, not_ok).",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(verdicts.clone()))?;
        registry.register(Box::new(cache_fills.clone()))?;
        for verdict in ["serve", "serve_at", "cached_or_warmed_only", "fallback"] {
            verdicts.with_label_values(&[verdict]);
        }
        for outcome in ["stored", "not_captured", "not_ok"] {
            cache_fills.with_label_values(&[outcome]);
        }
        Ok(Self {
            verdicts,
            downgrades: DowngradeMetrics::new(registry)?,
            cache_fills,
        })
    }
}

/// A started warmup manager and degradation controller, before the gateway state exists.
pub struct WarmupStart {
    runtime: WarmupRuntime,
    slot: StateSlot,
    follower: Arc<evaluator::WarmupFollower>,
    manager_join: JoinHandle<()>,
    reload_pump: JoinHandle<()>,
}

/// Starts the manager (ticking on its own every `warmup.tick_interval_ms`) and builds the
/// controller at level 0. `clock` is injected by tests; the system clock otherwise.
pub async fn start(
    config: &Config,
    admission: &switchyard_admission::Admission,
    registry: &prometheus::Registry,
    clock: Option<WallClock>,
) -> Result<WarmupStart, WarmupStartError> {
    let clock = clock.unwrap_or_else(WallClock::system);
    let slot: StateSlot = Arc::new(OnceLock::new());
    let landings = Arc::new(Landings::default());
    let warmup_ttfts = Arc::new(business_latency::WarmupTtfts::default());
    let executor = Arc::new(executor::GatewayWarmupExecutor::new(
        Arc::clone(&slot),
        Arc::clone(&landings),
        Arc::clone(&warmup_ttfts),
    ));
    let options = WarmupOptions {
        clock: clock.clone(),
        routing_key: routing_key_config(config),
    };
    let (manager, manager_join) =
        WarmupManager::start(config.warmup.clone(), executor, options, registry).await?;
    let actions = Arc::new(actions::GatewayActions::new(
        manager.clone(),
        admission.clone(),
        config.degradation.cache.enabled,
    ));
    let controller = match DegradationController::new(
        config.degradation.clone(),
        actions,
        clock.clone(),
        registry,
    ) {
        Ok(controller) => Arc::new(controller),
        Err(error) => {
            manager.stop();
            return Err(error.into());
        }
    };
    let cache = ResponseCache::new(config.degradation.cache.clone(), clock, registry)?;
    let (follower, reload_pump) = evaluator::follower(
        manager.clone(),
        Arc::clone(&controller),
        config.warmup.clone(),
    );
    let runtime = WarmupRuntime {
        view: controller.view(),
        manager,
        controller,
        cache: Arc::new(cache),
        landings,
        warmup_ttfts,
        metrics: Arc::new(FrontMetrics::new(registry)?),
    };
    Ok(WarmupStart {
        runtime,
        slot,
        follower: Arc::new(follower),
        manager_join,
        reload_pump,
    })
}

fn routing_key_config(config: &Config) -> RoutingKeyConfig {
    config.routing.routing_key.clone()
}

impl WarmupStart {
    pub fn runtime(&self) -> WarmupRuntime {
        self.runtime.clone()
    }

    /// Follows `[warmup]` and `[degradation]` changes (`degradation.cache` is restart-only).
    pub fn follower(&self) -> Arc<dyn Reconfigure> {
        self.follower.clone()
    }

    /// Hands the executors the gateway state and starts the degradation evaluator.
    pub fn bind(self, state: &Arc<AppState>) -> WarmupTasks {
        let _ = self.slot.set(Arc::downgrade(state));
        WarmupTasks {
            manager: self.runtime.manager.clone(),
            manager_join: self.manager_join,
            reload_pump: self.reload_pump,
            evaluator: evaluator::spawn(Arc::downgrade(state)),
            latency_feed: business_latency::spawn(Arc::downgrade(state)),
        }
    }
}

/// The tasks warmup and degradation run; [`WarmupTasks::stop`] ends them all.
pub struct WarmupTasks {
    manager: WarmupManager,
    manager_join: JoinHandle<()>,
    reload_pump: JoinHandle<()>,
    evaluator: JoinHandle<()>,
    latency_feed: JoinHandle<()>,
}

impl WarmupTasks {
    pub async fn stop(self) {
        self.evaluator.abort();
        self.latency_feed.abort();
        self.reload_pump.abort();
        self.manager.stop();
        let _ = self.manager_join.await;
    }
}

/// Whether any worker serving `model` can be routed to now (a downgrade-chain link is
/// available).
pub(crate) fn has_routable_worker(state: &AppState, model: &str) -> bool {
    state
        .registry
        .directory()
        .snapshot()
        .iter()
        .any(|w| w.serves(model) && w.routability() == Routability::Routable)
}

/// The workers business traffic for `model` can reach now: those serving it that pass the
/// prefilters (`None`: any model).
pub(crate) fn business_reachable(state: &AppState, model: Option<&str>) -> Vec<String> {
    let workers: Guard<Arc<Vec<Arc<switchyard_workers::WorkerHandle>>>> =
        state.registry.directory().snapshot();
    workers
        .iter()
        .filter(|w| model.is_none_or(|m| w.serves(m)))
        .filter(|w| w.routability() == Routability::Routable)
        .map(|w| w.name().to_string())
        .collect()
}
