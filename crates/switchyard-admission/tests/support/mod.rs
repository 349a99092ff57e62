//! Shared fixtures: an `Admission` over an in-memory ledger and a manual clock.
#![allow(dead_code)]

use std::sync::Arc;
use switchyard_admission::{
    Admission, AdmissionConfig, AdmissionSnapshot, InMemoryLedger, ScopeSnapshot, TenantConfig,
};
use switchyard_core::{ManualClock, Priority, Purpose, RequestTags};

pub struct Fixture {
    pub admission: Admission,
    pub clock: ManualClock,
    pub registry: prometheus::Registry,
}

pub fn fixture(config: AdmissionConfig) -> Fixture {
    let clock = ManualClock::new();
    let ledger = Arc::new(InMemoryLedger::from_config(
        &config,
        Arc::new(clock.clone()),
    ));
    let registry = prometheus::Registry::new();
    let admission = Admission::new(config, ledger, Arc::new(clock.clone()), &registry).unwrap();
    Fixture {
        admission,
        clock,
        registry,
    }
}

pub fn tenant(caller: &str) -> TenantConfig {
    TenantConfig {
        api_key: format!("key-{caller}").into(),
        caller: caller.into(),
        max_priority: Priority::P0,
        ..TenantConfig::default()
    }
}

pub fn with_tenants(tenants: Vec<TenantConfig>) -> AdmissionConfig {
    AdmissionConfig {
        tenants,
        ..AdmissionConfig::default()
    }
}

pub fn tags(caller: &str, priority: Priority) -> RequestTags {
    RequestTags {
        caller: Arc::from(caller),
        purpose: Purpose::Business,
        priority,
        core_caller: false,
        client_retry: 0,
    }
}

pub fn scope<'a>(snapshot: &'a AdmissionSnapshot, name: &str) -> &'a ScopeSnapshot {
    snapshot
        .scopes
        .iter()
        .find(|s| s.scope == name)
        .unwrap_or_else(|| panic!("no scope `{name}` in {:?}", snapshot.scopes))
}

/// Lets spawned tasks run until they block.
pub async fn run_pending() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// Value of a counter series, 0 if absent.
pub fn counter(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().iter())
        .filter(|metric| {
            labels.iter().all(|(key, value)| {
                metric
                    .get_label()
                    .iter()
                    .any(|pair| pair.name() == *key && pair.value() == *value)
            })
        })
        // Unset fields read 0, so this works for counters and gauges alike.
        .map(|metric| metric.get_counter().get_value() + metric.get_gauge().get_value())
        .sum()
}
