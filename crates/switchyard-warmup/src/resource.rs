//! Warmup resources at run time: the configured resource, its routing key (from the same
//! function business traffic uses), the tags its requests carry, and the lock-free cell the
//! request path touches (`note_use`) and the manager reads.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use switchyard_core::{Purpose, RequestTags};
use switchyard_router::{RoutingKeyConfig, RoutingKeyInputs, routing_key};

use crate::clock::UnixMillis;
use crate::config::{ResourceConfig, ResourceKind, TargetConfig, Tier, WarmupConfig};

/// One warmup target, as the [`crate::WarmupExecutor`] sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WarmupResource {
    pub name: Arc<str>,
    pub kind: ResourceKind,
    /// The configured tier (degradation changes what runs, never the tier).
    pub tier: Tier,
    pub target: TargetConfig,
    pub estimated_cost_tokens: u64,
    /// The key business traffic with the same session / user / prompt head routes by,
    /// computed by `switchyard_router::routing_key`. None for connection and context
    /// warmups, and when the target names nothing to key on.
    pub routing_key: Option<String>,
    /// Tags the warmup request must carry through the front door (`purpose = warmup`).
    pub tags: RequestTags,
}

impl WarmupResource {
    pub fn from_config(
        config: &ResourceConfig,
        keys: &RoutingKeyConfig,
        warmup: &WarmupConfig,
    ) -> Self {
        let target = &config.target;
        let routing_key = match config.kind {
            ResourceKind::Instance | ResourceKind::Cache => {
                let inputs = RoutingKeyInputs {
                    session_id: target.session_id.as_deref(),
                    user: target.user.as_deref(),
                    prompt: target.prompt.as_deref().unwrap_or(""),
                };
                routing_key(keys, &inputs).map(|key| key.key.to_string())
            }
            ResourceKind::Connection | ResourceKind::Context => None,
        };
        Self {
            name: Arc::from(config.name.as_str()),
            kind: config.kind,
            tier: config.tier,
            target: config.target.clone(),
            estimated_cost_tokens: config.estimated_cost_tokens,
            routing_key,
            tags: RequestTags {
                caller: Arc::from(warmup.caller.as_str()),
                purpose: Purpose::Warmup,
                priority: warmup.priority,
                core_caller: false,
                client_retry: 0,
            },
        }
    }

    /// Whether a warmup of this kind spends remote quota (and so counts against the budget).
    pub fn spends_quota(&self) -> bool {
        matches!(self.kind, ResourceKind::Instance | ResourceKind::Cache)
    }

    /// Whether a business request for `model` with this `prompt` (landing on `worker`)
    /// uses this resource.
    pub fn used_by(&self, model: &str, prompt: &str, worker: Option<&str>) -> bool {
        let target = &self.target;
        match self.kind {
            ResourceKind::Connection => worker.is_some() && target.worker.as_deref() == worker,
            ResourceKind::Instance => target.model.as_deref() == Some(model),
            ResourceKind::Cache => {
                target.model.as_deref() == Some(model)
                    && target
                        .prompt
                        .as_deref()
                        .is_some_and(|head| prompt.starts_with(head))
            }
            ResourceKind::Context => false,
        }
    }
}

/// Per-resource state shared by the request path and the manager, all atomics.
#[derive(Debug)]
pub(crate) struct ResourceCell {
    pub(crate) resource: Arc<WarmupResource>,
    /// Last successful warmup (0: never).
    pub(crate) last_warmed: AtomicU64,
    /// Last business use (0: never).
    pub(crate) last_used: AtomicU64,
    /// A successful warmup still waiting for its first use inside the hit window (0: none).
    pub(crate) pending_hit: AtomicU64,
    pub(crate) hits: AtomicU64,
    pub(crate) misses: AtomicU64,
}

impl ResourceCell {
    pub(crate) fn new(resource: WarmupResource) -> Self {
        Self {
            resource: Arc::new(resource),
            last_warmed: AtomicU64::new(0),
            last_used: AtomicU64::new(0),
            pending_hit: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Carries the measured state over a config reload that kept the resource.
    pub(crate) fn inherit(&self, old: &ResourceCell) {
        for (new, old) in [
            (&self.last_warmed, &old.last_warmed),
            (&self.last_used, &old.last_used),
            (&self.pending_hit, &old.pending_hit),
            (&self.hits, &old.hits),
            (&self.misses, &old.misses),
        ] {
            new.store(old.load(Ordering::Relaxed), Ordering::Relaxed);
        }
    }

    /// Warm means warmed or used within `cold_after_ms`.
    pub(crate) fn is_warm(&self, now: UnixMillis, cold_after_ms: u64) -> bool {
        let latest = self
            .last_warmed
            .load(Ordering::Acquire)
            .max(self.last_used.load(Ordering::Acquire));
        latest != 0 && now.saturating_sub(latest) < cold_after_ms
    }

    /// Hit rate over judged warmups, once there are `min_samples` of them.
    pub(crate) fn hit_rate(&self, min_samples: u64) -> Option<f64> {
        let hits = self.hits.load(Ordering::Relaxed);
        let judged = hits + self.misses.load(Ordering::Relaxed);
        (judged >= min_samples && judged > 0).then(|| hits as f64 / judged as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_key_comes_from_the_shared_function() {
        let mut config = ResourceConfig::new("sys", ResourceKind::Cache, Tier::L2);
        config.target.model = Some("m".into());
        config.target.prompt = Some("You are a helpful assistant. ".repeat(20));
        let keys = RoutingKeyConfig::default();
        let resource = WarmupResource::from_config(&config, &keys, &WarmupConfig::default());
        let prompt = config.target.prompt.clone().unwrap();
        let business_prompt = format!("{prompt}What is 2 + 2?");
        let business = routing_key(
            &keys,
            &RoutingKeyInputs {
                session_id: None,
                user: None,
                prompt: &business_prompt,
            },
        )
        .unwrap();
        assert_eq!(resource.routing_key.as_deref(), Some(business.key));
        assert_eq!(resource.tags.purpose, Purpose::Warmup);
        assert!(resource.used_by("m", &format!("{prompt}hi"), None));
        assert!(!resource.used_by("m", "something else", None));
    }
}
