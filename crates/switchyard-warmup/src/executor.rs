//! The one thing the gateway implements for warmup: performing a warmup through its own
//! front door.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::error::WarmupError;
use crate::resource::WarmupResource;

/// What one warmup did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WarmupOutcome {
    /// The worker the warmup landed on (None for context refreshes).
    pub landed_on: Option<String>,
    /// The workers business traffic with the same routing key can reach right now (after
    /// the prefilters). A warmup that landed outside this set warmed the wrong worker and is
    /// counted as misdirected. Empty together with `landed_on: None`: nothing to check.
    pub business_reachable: Vec<String>,
    /// Tokens the warmup spent (the worker's reported usage).
    pub tokens_spent: u64,
}

impl WarmupOutcome {
    /// The worker it landed on, when that worker is not one business traffic would reach.
    pub fn misdirected_to(&self) -> Option<&str> {
        let landed = self.landed_on.as_deref()?;
        (!self.business_reachable.iter().any(|w| w == landed)).then_some(landed)
    }
}

/// Performs warmups. The gateway sends each one through its own front door: tagged
/// `purpose=warmup` (`resource.tags`), through the admission gates, routed by the same
/// routing-key function as business traffic (`resource.routing_key` is what that function
/// gives for the target), and reports where it landed and which workers business traffic
/// could have reached.
pub trait WarmupExecutor: Send + Sync + 'static {
    fn warm(
        &self,
        resource: &WarmupResource,
    ) -> impl Future<Output = Result<WarmupOutcome, WarmupError>> + Send;
}

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// `WarmupExecutor` with its future boxed, so the manager can hold any executor.
pub(crate) trait DynExecutor: Send + Sync + 'static {
    fn warm_boxed<'a>(
        &'a self,
        resource: &'a WarmupResource,
    ) -> BoxFuture<'a, Result<WarmupOutcome, WarmupError>>;
}

impl<E: WarmupExecutor> DynExecutor for E {
    fn warm_boxed<'a>(
        &'a self,
        resource: &'a WarmupResource,
    ) -> BoxFuture<'a, Result<WarmupOutcome, WarmupError>> {
        Box::pin(self.warm(resource))
    }
}

/// How one warmup attempt ended, as the manager saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WarmupResult {
    Warmed {
        outcome: WarmupOutcome,
        latency: Duration,
    },
    /// Landed on a worker business traffic would not reach: nothing useful was warmed.
    Misdirected {
        outcome: WarmupOutcome,
        latency: Duration,
    },
    Failed {
        error: WarmupError,
        latency: Duration,
    },
    /// Not attempted.
    Skipped(SkipReason),
}

impl WarmupResult {
    pub fn is_warmed(&self) -> bool {
        matches!(self, WarmupResult::Warmed { .. })
    }

    pub(crate) fn label(&self) -> &'static str {
        match self {
            WarmupResult::Warmed { .. } => "warmed",
            WarmupResult::Misdirected { .. } => "misdirected",
            WarmupResult::Failed { .. } => "failed",
            WarmupResult::Skipped(_) => "skipped",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The period's warmup budget cannot cover the estimate.
    Budget,
    /// Degradation (or `enabled = false`) does not allow this tier now.
    Degraded,
}

impl SkipReason {
    pub fn label(self) -> &'static str {
        match self {
            SkipReason::Budget => "budget",
            SkipReason::Degraded => "degraded",
        }
    }
}
