//! Fakes and helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use switchyard_core::{ManualClock, WallClock};
use switchyard_warmup::{
    ActionError, ActionExecutor, DegradationAction, DegradationConfig, DegradationController,
    ResourceConfig, ResourceKind, Tier, WarmupConfig, WarmupError, WarmupExecutor, WarmupManager,
    WarmupOptions, WarmupOutcome, WarmupResource,
};
use tokio::sync::{Semaphore, watch};

pub const MIN: u64 = 60;
/// 2024-01-02 00:00:00 UTC.
pub const DAY_START_SECS: u64 = 1_704_153_600;

/// A wall clock driven by a `ManualClock`, starting at `DAY_START_SECS + offset_secs`.
pub fn manual_wall(offset_secs: u64) -> (ManualClock, WallClock) {
    let manual = ManualClock::new();
    let wall = WallClock::new(
        Arc::new(manual.clone()),
        Duration::from_secs(DAY_START_SECS + offset_secs),
    );
    (manual, wall)
}

pub fn instance(name: &str, tier: Tier) -> ResourceConfig {
    let mut resource = ResourceConfig::new(name, ResourceKind::Instance, tier);
    resource.target.model = Some("m".into());
    resource.estimated_cost_tokens = 1_000;
    resource
}

/// Manual ticking, generous budget.
pub fn config(resources: Vec<ResourceConfig>) -> WarmupConfig {
    let mut config = WarmupConfig {
        tick_interval_ms: 0,
        resources,
        ..Default::default()
    };
    config.budget.total_quota = 100_000_000;
    config
}

/// Counts calls, can fail, can block on a gate, reports where it landed.
pub struct FakeExecutor {
    pub calls: AtomicUsize,
    pub by_name: Mutex<HashMap<String, usize>>,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub started: watch::Sender<usize>,
    pub fail: Mutex<bool>,
    pub tokens: u64,
    /// Some: every warmup waits for a permit.
    pub gate: Option<Arc<Semaphore>>,
    /// Paused-time sleep per warmup.
    pub delay: Duration,
    pub landed_on: Mutex<Option<String>>,
    pub reachable: Mutex<Vec<String>>,
}

impl FakeExecutor {
    pub fn new() -> Self {
        Self {
            calls: AtomicUsize::new(0),
            by_name: Mutex::new(HashMap::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            started: watch::channel(0).0,
            fail: Mutex::new(false),
            tokens: 1_000,
            gate: None,
            delay: Duration::ZERO,
            landed_on: Mutex::new(Some("w1".into())),
            reachable: Mutex::new(vec!["w1".into()]),
        }
    }

    pub fn gated() -> (Self, Arc<Semaphore>) {
        let gate = Arc::new(Semaphore::new(0));
        (
            Self {
                gate: Some(gate.clone()),
                ..Self::new()
            },
            gate,
        )
    }

    pub fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    pub fn calls_of(&self, name: &str) -> usize {
        self.by_name.lock().get(name).copied().unwrap_or(0)
    }

    pub async fn wait_started(&self, at_least: usize) {
        let mut started = self.started.subscribe();
        tokio::time::timeout(
            Duration::from_secs(10),
            started.wait_for(|&n| n >= at_least),
        )
        .await
        .expect("warmups did not start in time")
        .unwrap();
    }
}

impl WarmupExecutor for FakeExecutor {
    async fn warm(&self, resource: &WarmupResource) -> Result<WarmupOutcome, WarmupError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        *self
            .by_name
            .lock()
            .entry(resource.name.to_string())
            .or_default() += 1;
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_in_flight.fetch_max(now, Ordering::SeqCst);
        self.started.send_modify(|n| *n += 1);
        if let Some(gate) = &self.gate {
            gate.acquire().await.unwrap().forget();
        }
        if !self.delay.is_zero() {
            tokio::time::sleep(self.delay).await;
        }
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        if *self.fail.lock() {
            return Err(WarmupError::Failed("worker answered 500".into()));
        }
        Ok(WarmupOutcome {
            landed_on: self.landed_on.lock().clone(),
            business_reachable: self.reachable.lock().clone(),
            tokens_spent: self.tokens,
        })
    }
}

pub async fn start(
    config: WarmupConfig,
    executor: Arc<FakeExecutor>,
    wall: WallClock,
) -> (WarmupManager, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let options = WarmupOptions {
        clock: wall,
        ..Default::default()
    };
    let (manager, _join) = WarmupManager::start(config, executor, options, &registry)
        .await
        .unwrap();
    (manager, registry)
}

/// Sum of the counter, gauge or histogram-count series with these labels (0 when absent).
pub fn metric(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().iter())
        .filter(|m| {
            labels.iter().all(|(key, value)| {
                m.get_label()
                    .iter()
                    .any(|pair| pair.name() == *key && pair.value() == *value)
            })
        })
        // Unset fields read 0, so this works for every metric type.
        .map(|m| {
            m.get_counter().get_value()
                + m.get_gauge().get_value()
                + m.get_histogram().get_sample_count() as f64
        })
        .sum()
}

/// Which degradation actions [`FakeActions`] refuses.
pub type FailWhen = Box<dyn Fn(&DegradationAction) -> bool + Send + Sync>;

/// Records the degradation actions applied; refuses those `fail_when` picks while it is set.
#[derive(Default)]
pub struct FakeActions {
    pub applied: Mutex<Vec<DegradationAction>>,
    pub fail_when: Mutex<Option<FailWhen>>,
}

impl ActionExecutor for FakeActions {
    async fn apply(&self, action: &DegradationAction) -> Result<(), ActionError> {
        if self
            .fail_when
            .lock()
            .as_ref()
            .is_some_and(|fail| fail(action))
        {
            return Err(ActionError(format!(
                "{} could not be applied",
                action.label()
            )));
        }
        self.applied.lock().push(*action);
        Ok(())
    }
}

/// A degradation controller with the default config on a manual clock at the day's start,
/// acting through [`FakeActions`], with its own metrics registry.
pub fn controller() -> (
    DegradationController,
    Arc<FakeActions>,
    switchyard_core::ManualClock,
    prometheus::Registry,
) {
    let (clock, wall) = manual_wall(0);
    let actions = Arc::new(FakeActions::default());
    let registry = prometheus::Registry::new();
    let controller = DegradationController::new(
        DegradationConfig::default(),
        actions.clone(),
        wall,
        &registry,
    )
    .unwrap();
    (controller, actions, clock, registry)
}
