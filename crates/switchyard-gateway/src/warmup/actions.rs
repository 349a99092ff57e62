//! Degradation actions made real. Each one either takes effect or returns an error — the
//! controller then marks the whole level failed and keeps the previous one; nothing here is
//! best effort:
//!
//! - warmup limits: the manager applies them (queued warmups of stopped tiers are dropped)
//!   and confirms; a manager that does not answer fails the action;
//! - concurrency ratio: admission's dispatch capacity is rescaled at once;
//! - caller policy and serve mode take effect on the request path through the view the
//!   controller publishes once every action succeeded; the action checks that the gateway can
//!   honour them: "core callers only" needs at least one core caller (otherwise it refuses
//!   everyone), "cache and warmed only" needs the response cache.

use switchyard_admission::Admission;
use switchyard_warmup::degradation::{CallerPolicy, ServeMode};
use switchyard_warmup::{ActionError, ActionExecutor, DegradationAction, WarmupManager};
use tracing::info;

pub(crate) struct GatewayActions {
    manager: WarmupManager,
    admission: Admission,
    cache_enabled: bool,
}

impl GatewayActions {
    pub(crate) fn new(manager: WarmupManager, admission: Admission, cache_enabled: bool) -> Self {
        Self {
            manager,
            admission,
            cache_enabled,
        }
    }

    fn core_callers(&self) -> usize {
        self.admission
            .config()
            .tenants
            .iter()
            .filter(|tenant| tenant.core)
            .count()
    }
}

impl ActionExecutor for GatewayActions {
    async fn apply(&self, action: &DegradationAction) -> Result<(), ActionError> {
        match *action {
            DegradationAction::WarmupLimits(limits) => {
                self.manager.set_limits(limits).await.map_err(|e| {
                    ActionError(format!("the warmup manager did not apply the limits: {e}"))
                })?;
                let applied = self.manager.limits();
                if applied != limits {
                    return Err(ActionError(format!(
                        "the warmup manager reports {applied:?} after being told {limits:?}"
                    )));
                }
            }
            DegradationAction::ConcurrencyRatio { ratio } => {
                let slots = self
                    .admission
                    .set_capacity_ratio(ratio)
                    .map_err(|e| ActionError(format!("admission capacity not changed: {e}")))?;
                info!(ratio, slots, "degradation: admission capacity set");
            }
            DegradationAction::CallerPolicy { policy, .. } => {
                if policy == CallerPolicy::CoreOnly && self.core_callers() == 0 {
                    return Err(ActionError(
                        "core callers only: no tenant in [admission] is marked core, so every \
                         caller would be refused"
                            .into(),
                    ));
                }
            }
            DegradationAction::ServeMode { mode } => {
                if mode == ServeMode::CacheAndWarmedOnly && !self.cache_enabled {
                    return Err(ActionError(
                        "cache and warmed only: the response cache is disabled \
                         ([degradation.cache] enabled = false)"
                            .into(),
                    ));
                }
            }
        }
        Ok(())
    }
}
