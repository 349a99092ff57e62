//! `switchyard_discovery_*`: what the Kubernetes watch saw and did.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

pub struct DiscoveryMetrics {
    pub events: IntCounterVec,
    pub lists: IntCounterVec,
    pub actions: IntCounterVec,
    pub workers: IntGauge,
    pub pending: IntGauge,
}

impl DiscoveryMetrics {
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let events = IntCounterVec::new(
            Opts::new(
                "switchyard_discovery_watch_events_total",
                "Kubernetes watch events received, by type.",
            ),
            &["type"],
        )?;
        let lists = IntCounterVec::new(
            Opts::new(
                "switchyard_discovery_lists_total",
                "Full pod lists, by reason (start, periodic, expired, error).",
            ),
            &["reason"],
        )?;
        let actions = IntCounterVec::new(
            Opts::new(
                "switchyard_discovery_actions_total",
                "Registry changes made by discovery, by action (added, drained, replaced, \
                 model_unknown, add_failed).",
            ),
            &["action"],
        )?;
        let workers = IntGauge::new(
            "switchyard_discovery_workers",
            "Workers currently registered from Kubernetes discovery.",
        )?;
        let pending = IntGauge::new(
            "switchyard_discovery_pending_workers",
            "Ready pods not registered yet (model unknown, or name still held by a draining pod).",
        )?;
        registry.register(Box::new(events.clone()))?;
        registry.register(Box::new(lists.clone()))?;
        registry.register(Box::new(actions.clone()))?;
        registry.register(Box::new(workers.clone()))?;
        registry.register(Box::new(pending.clone()))?;
        Ok(Self {
            events,
            lists,
            actions,
            workers,
            pending,
        })
    }
}
