//! The controller's clock tick: once a second, the fleet's budget water level (spend over
//! limit across budgeted callers) and the overload detector's state go to
//! `DegradationController::evaluate`,
//! and the gateway's retry amplification to the warmup books. Plus the follower that
//! hot-reloads `[warmup]` and `[degradation]`.

use std::sync::Arc;
use std::time::Duration;
use switchyard_admission::GatewayState;
use switchyard_warmup::degradation::{Evaluation, OverloadState};
use switchyard_warmup::{DegradationController, Signals, WarmupConfig, WarmupManager};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::config::Config;
use crate::reload::Reconfigure;
use crate::state::{Stack, WarmupRuntime};

const EVALUATE_EVERY: Duration = Duration::from_secs(1);

/// Runs until aborted by `WarmupTasks::stop`.
pub(super) fn spawn(
    stack: Arc<Stack>,
    manager: WarmupManager,
    controller: Arc<DegradationController>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(EVALUATE_EVERY);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            evaluate(&stack, &manager, &controller).await;
        }
    })
}

/// One evaluation with fresh signals.
pub async fn evaluate_once(stack: &Stack, runtime: &WarmupRuntime) -> Evaluation {
    evaluate(stack, &runtime.manager, &runtime.controller).await
}

async fn evaluate(
    stack: &Stack,
    manager: &WarmupManager,
    controller: &DegradationController,
) -> Evaluation {
    let attempts = &stack.metrics.upstream_attempts;
    let first = attempts.with_label_values(&["first"]).get();
    let retries = attempts.with_label_values(&["retry"]).get();
    manager.note_retry_amplification(first + retries, first);
    controller.evaluate(signals(stack)).await
}

pub fn signals(stack: &Stack) -> Signals {
    Signals {
        // The fleet's budget, not the busiest tenant's: one tenant near its own limit
        // degrades only its own requests (the proxy's degrade stage), never everybody's.
        water_level: stack.admission.fleet_water_level(),
        overload: match stack.admission.state() {
            GatewayState::Normal => OverloadState::Normal,
            GatewayState::Overloaded => OverloadState::Overloaded,
            GatewayState::Recovering => OverloadState::Recovering,
        },
    }
}

/// Hands config changes to the manager (an actor call, so through an owned task) and the
/// controller.
pub(super) struct WarmupFollower {
    warmup: watch::Sender<WarmupConfig>,
    controller: Arc<DegradationController>,
}

pub(super) fn follower(
    manager: WarmupManager,
    controller: Arc<DegradationController>,
    initial: WarmupConfig,
) -> (WarmupFollower, JoinHandle<()>) {
    let (sender, mut changes) = watch::channel(initial);
    let pump = tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            let next = changes.borrow_and_update().clone();
            if let Err(error) = manager.reload(next).await {
                warn!(%error, "warmup config change not applied");
            }
        }
    });
    let follower = WarmupFollower {
        warmup: sender,
        controller,
    };
    (follower, pump)
}

impl Reconfigure for WarmupFollower {
    fn reconfigure(&self, config: &Config) {
        self.warmup.send_if_modified(|current| {
            let changed = *current != config.warmup;
            if changed {
                *current = config.warmup.clone();
            }
            changed
        });
        if *self.controller.config() != config.degradation {
            if let Err(error) = self.controller.reload(config.degradation.clone()) {
                // Unreachable in practice: the whole config was validated before it applied.
                warn!(%error, "degradation config change not applied");
            }
        }
    }
}
