//! Warmup and graded degradation in the running gateway, on top of
//! `switchyard-warmup`:
//!
//! - `executor`: the [`WarmupExecutor`] that sends every warmup through the gateway's own
//!   front door (admission with the warmup tags, prefilters, the routing policy with the same
//!   routing-key inputs as business traffic, retries, metering) and reports where it landed;
//! - `actions`: the [`switchyard_warmup::ActionExecutor`] that makes a degradation level real
//!   (warmup limits, admission capacity, caller policy, serve mode) or fails loudly;
//! - `evaluator`: the owned once-a-second task feeding the controller its signals, and the
//!   config follower that hot-reloads both;
//! - `business_latency`: the business TTFTs (warmups taken out) fed to the manager's ramp.
//!
//! The request path's part (the verdict, downgrade chain, cache, lazy warmup) is the
//! proxy's `degrade` stage; this module depends on the proxy, never the reverse.

mod actions;
mod business_latency;
mod evaluator;
mod executor;
pub(crate) mod landings;

use std::sync::Arc;
use switchyard_core::WallClock;
use switchyard_router::RoutingKeyConfig;
use switchyard_warmup::{
    DegradationController, DegradationError, ManagerError, ResponseCache, ViewReader,
    WarmupManager, WarmupOptions,
};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::metrics::degradation::DegradationMetrics;
use crate::reload::Reconfigure;
use crate::state::{Stack, WarmupRuntime};

pub use evaluator::{evaluate_once, signals};
pub use landings::{Landing, Landings};

#[derive(Debug, thiserror::Error)]
pub enum WarmupStartError {
    #[error(transparent)]
    Manager(#[from] ManagerError),
    #[error(transparent)]
    Degradation(#[from] DegradationError),
    #[error("warmup metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// A started warmup manager, degradation controller and their tasks.
pub struct WarmupStart {
    pub runtime: WarmupRuntime,
    /// Follows `[warmup]` and `[degradation]` changes (`degradation.cache` is restart-only).
    pub follower: Arc<dyn Reconfigure>,
    pub tasks: WarmupTasks,
}

/// Starts the manager (ticking on its own every `warmup.tick_interval_ms`, its warmups sent
/// through `stack`), the controller at level 0, its once-a-second evaluation and the
/// business-latency feed. `clock` is injected by tests; the system clock otherwise.
pub async fn start(
    config: &Config,
    stack: &Arc<Stack>,
    registry: &prometheus::Registry,
    clock: Option<WallClock>,
) -> Result<WarmupStart, WarmupStartError> {
    let clock = clock.unwrap_or_else(WallClock::system);
    let landings = Arc::new(Landings::default());
    let warmup_ttfts = Arc::new(business_latency::WarmupTtfts::default());
    let metrics = Arc::new(DegradationMetrics::new(registry)?);
    let cache = Arc::new(ResponseCache::new(
        config.degradation.cache.clone(),
        clock.clone(),
        registry,
    )?);
    // Made before the controller that publishes to it: warmups read the level in force.
    let view = ViewReader::undegraded(&clock);
    let executor = Arc::new(executor::GatewayWarmupExecutor::new(
        Arc::clone(stack),
        view.clone(),
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
        stack.admission.clone(),
        config.degradation.cache.enabled,
    ));
    let controller = match DegradationController::publishing_to(
        config.degradation.clone(),
        actions,
        clock,
        registry,
        view.clone(),
    ) {
        Ok(controller) => Arc::new(controller),
        Err(error) => {
            manager.stop();
            return Err(error.into());
        }
    };
    let (follower, reload_pump) = evaluator::follower(
        manager.clone(),
        Arc::clone(&controller),
        config.warmup.clone(),
    );
    let tasks = WarmupTasks {
        manager: manager.clone(),
        manager_join,
        reload_pump,
        evaluator: evaluator::spawn(Arc::clone(stack), manager.clone(), Arc::clone(&controller)),
        latency_feed: business_latency::spawn(
            Arc::clone(&stack.metrics),
            warmup_ttfts,
            manager.clone(),
        ),
    };
    let runtime = WarmupRuntime {
        view,
        manager,
        controller,
        cache,
        landings,
        metrics,
    };
    Ok(WarmupStart {
        runtime,
        follower: Arc::new(follower),
        tasks,
    })
}

fn routing_key_config(config: &Config) -> RoutingKeyConfig {
    config.routing.routing_key.clone()
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
        // Awaited so the stack they hold is released before the gateway stops its ledger.
        let _ = self.evaluator.await;
        let _ = self.latency_feed.await;
        let _ = self.reload_pump.await;
    }
}
