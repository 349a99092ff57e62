//! Degradation actions: idempotent setters, so entering a level (worse or better) is the
//! same thing: apply that level's full set. Each must succeed; the gateway carries them out.

use serde::Serialize;
use std::future::Future;
use std::pin::Pin;

use super::effects::{CallerPolicy, Effects, ServeMode};
use crate::error::ActionError;
use crate::schedule::WarmupLimits;

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum DegradationAction {
    /// Apply to the warmup manager (`WarmupManager::set_limits`).
    WarmupLimits(WarmupLimits),
    /// Scale the gateway's concurrency limit (e.g. admission `max_concurrent`) to this share.
    ConcurrencyRatio { ratio: f64 },
    /// Who is served as usual; non-core callers skip `downgrade_skip` chain links.
    CallerPolicy {
        policy: CallerPolicy,
        downgrade_skip: usize,
    },
    /// What may answer requests (the response cache must be able to serve when it is
    /// `cache_and_warmed_only`).
    ServeMode { mode: ServeMode },
}

impl DegradationAction {
    pub fn label(&self) -> &'static str {
        match self {
            Self::WarmupLimits(_) => "warmup_limits",
            Self::ConcurrencyRatio { .. } => "concurrency_ratio",
            Self::CallerPolicy { .. } => "caller_policy",
            Self::ServeMode { .. } => "serve_mode",
        }
    }

    pub const LABELS: [&'static str; 4] = [
        "warmup_limits",
        "concurrency_ratio",
        "caller_policy",
        "serve_mode",
    ];

    /// The actions that establish `effects`, cheapest and most protective first.
    pub fn establishing(effects: &Effects) -> Vec<DegradationAction> {
        vec![
            Self::WarmupLimits(effects.warmup),
            Self::ConcurrencyRatio {
                ratio: effects.concurrency_ratio,
            },
            Self::CallerPolicy {
                policy: effects.callers,
                downgrade_skip: effects.downgrade_skip,
            },
            Self::ServeMode {
                mode: effects.serve,
            },
        ]
    }

    /// Records a successful action in the effects actually in force.
    pub(crate) fn apply_to(&self, effects: &mut Effects) {
        match *self {
            Self::WarmupLimits(limits) => effects.warmup = limits,
            Self::ConcurrencyRatio { ratio } => effects.concurrency_ratio = ratio,
            Self::CallerPolicy {
                policy,
                downgrade_skip,
            } => {
                effects.callers = policy;
                effects.downgrade_skip = downgrade_skip;
            }
            Self::ServeMode { mode } => effects.serve = mode,
        }
    }
}

/// Carries out degradation actions. Every action is must-succeed: return an error whenever
/// the action did not take effect (never "best effort"), and the controller marks the whole
/// level failed instead of pretending it is active.
pub trait ActionExecutor: Send + Sync + 'static {
    fn apply(
        &self,
        action: &DegradationAction,
    ) -> impl Future<Output = Result<(), ActionError>> + Send;
}

pub(crate) type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

pub(crate) trait DynActionExecutor: Send + Sync + 'static {
    fn apply_boxed<'a>(
        &'a self,
        action: &'a DegradationAction,
    ) -> BoxFuture<'a, Result<(), ActionError>>;
}

impl<E: ActionExecutor> DynActionExecutor for E {
    fn apply_boxed<'a>(
        &'a self,
        action: &'a DegradationAction,
    ) -> BoxFuture<'a, Result<(), ActionError>> {
        Box::pin(self.apply(action))
    }
}
