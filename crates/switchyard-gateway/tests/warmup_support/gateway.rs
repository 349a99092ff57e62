#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]
//! Gateways for the warmup and degradation tests: config over fake workers, start with an
//! injected clock, run the due scheduled warmups.

use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::ManualClock;
use switchyard_core::WallClock;
use switchyard_gateway::config::AdmissionConfig;
use switchyard_gateway::{Config, GatewayHandle, StartOptions};
use switchyard_warmup::{ChainConfig, ResourceConfig, ResourceKind, Tier};

use super::FakeWorker;
use crate::common::ADMIN_KEY;

pub const NO_DELAY: Duration = Duration::ZERO;

pub fn config(workers: &[&FakeWorker], policy: &str) -> Config {
    let mut config = Config::default();
    config.server.port = 0;
    config.routing.policy = policy.into();
    config.workers = workers.iter().map(|w| w.spec()).collect();
    // The tests move the schedule themselves (`manager.tick()`).
    config.warmup.tick_interval_ms = 0;
    config
}

pub fn resource(name: &str, kind: ResourceKind, tier: Tier, model: &str) -> ResourceConfig {
    let mut resource = ResourceConfig::new(name, kind, tier);
    resource.target.model = Some(model.into());
    resource.estimated_cost_tokens = 20;
    resource
}

pub async fn start(config: Config) -> (GatewayHandle, ManualClock) {
    let clock = ManualClock::new();
    let wall = WallClock::new(Arc::new(clock.clone()), Duration::from_secs(1_700_000_000));
    let options = StartOptions {
        admin_key: Some(ADMIN_KEY.into()),
        warmup_clock: Some(wall),
        ..StartOptions::default()
    };
    let gateway = switchyard_gateway::start_with(config, options)
        .await
        .unwrap();
    (gateway, clock)
}

pub fn with_tenants(mut config: Config, tenants: Value) -> Config {
    let admission: AdmissionConfig = serde_json::from_value(json!({ "tenants": tenants })).unwrap();
    config.admission = admission;
    config
}

/// Runs every due scheduled warmup to the end.
pub async fn warm_scheduled(gateway: &GatewayHandle) -> usize {
    let manager = &gateway.state().warmup.manager;
    let tick = manager.tick().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), manager.wait_idle())
        .await
        .expect("warmups finish");
    tick.queued.len()
}

pub fn chain(alias: &str, models: &[&str]) -> ChainConfig {
    ChainConfig {
        alias: alias.into(),
        models: models.iter().map(|m| m.to_string()).collect(),
        cache_fallback: true,
    }
}
