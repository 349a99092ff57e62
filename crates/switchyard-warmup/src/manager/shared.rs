//! State shared by the manager actor, its warmup jobs and the request path: the resource
//! table, limits, books and metrics, and the one function that performs a warmup.

use arc_swap::{ArcSwap, ArcSwapOption};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use switchyard_router::RoutingKeyConfig;
use tokio::sync::watch;
use tracing::{error, warn};

use super::report::WaveStatus;
use crate::accounting::{self, Books};
use crate::budget::warmup_budget;
use crate::clock::secs_to_ms;
use crate::config::{ResourceConfig, Tier, WarmupConfig};
use crate::executor::{DynExecutor, SkipReason, WarmupResult};
use crate::metrics::WarmupMetrics;
use crate::resource::{ResourceCell, WarmupResource};
use crate::schedule::WarmupLimits;
use crate::singleflight::Singleflight;
use switchyard_core::WallClock;

/// The configured resources and their cells, swapped whole on reload.
pub(crate) struct ResourceTable {
    pub(crate) entries: Vec<(ResourceConfig, Arc<ResourceCell>)>,
    by_name: HashMap<Arc<str>, usize>,
}

impl ResourceTable {
    pub(crate) fn build(
        config: &WarmupConfig,
        keys: &RoutingKeyConfig,
        previous: Option<&ResourceTable>,
    ) -> Self {
        let mut entries = Vec::with_capacity(config.resources.len());
        let mut by_name = HashMap::with_capacity(config.resources.len());
        for resource in &config.resources {
            let cell = ResourceCell::new(WarmupResource::from_config(resource, keys, config));
            if let Some(old) = previous.and_then(|table| table.get(&resource.name)) {
                cell.inherit(old);
            }
            by_name.insert(Arc::clone(&cell.resource.name), entries.len());
            entries.push((resource.clone(), Arc::new(cell)));
        }
        Self { entries, by_name }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Arc<ResourceCell>> {
        self.by_name.get(name).map(|&index| &self.entries[index].1)
    }

    pub(crate) fn cells(&self) -> impl Iterator<Item = &Arc<ResourceCell>> {
        self.entries.iter().map(|(_, cell)| cell)
    }
}

pub(crate) struct Core {
    pub(crate) clock: WallClock,
    pub(crate) executor: Arc<dyn DynExecutor>,
    pub(crate) keys: RoutingKeyConfig,
    pub(crate) config: ArcSwap<WarmupConfig>,
    pub(crate) table: ArcSwap<ResourceTable>,
    pub(crate) limits: ArcSwap<WarmupLimits>,
    pub(crate) books: Books,
    pub(crate) metrics: WarmupMetrics,
    pub(crate) lazy: Singleflight<WarmupResult>,
    pub(crate) wave: ArcSwapOption<WaveStatus>,
    /// Warmups queued or running in the current wave.
    pub(crate) busy: watch::Sender<usize>,
}

/// Gives an unsettled budget reservation back (the warmup was cancelled).
struct Hold<'a> {
    books: &'a Books,
    estimate: u64,
    settled: bool,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.books.settle(self.estimate, 0, false, 0);
        }
    }
}

impl Core {
    /// Performs one warmup, within the limits and the budget, and books its result.
    pub(crate) async fn run(&self, cell: &ResourceCell) -> WarmupResult {
        let resource = &cell.resource;
        let tier = resource.tier;
        let config = self.config.load();
        if !config.enabled || !self.limits.load().allows(tier) {
            return self.skip(resource, SkipReason::Degraded);
        }
        let estimate = if resource.spends_quota() {
            resource.estimated_cost_tokens
        } else {
            0
        };
        let budget = warmup_budget(&config.budget);
        if !self
            .books
            .reserve(estimate, budget, self.clock.unix_millis())
        {
            if tier == Tier::L0 {
                self.metrics.alerts.with_label_values(&["budget"]).inc();
                error!(
                    resource = %resource.name,
                    budget, spent = self.books.warmup_spent(),
                    "L0 keep-alive skipped: the warmup budget is exhausted"
                );
            }
            return self.skip(resource, SkipReason::Budget);
        }
        let mut hold = Hold {
            books: &self.books,
            estimate,
            settled: false,
        };
        let started = self.clock.instant();
        let attempt = self.executor.warm_boxed(resource).await;
        let latency = self.clock.instant().saturating_duration_since(started);
        let now = self.clock.unix_millis();
        let spent = attempt.as_ref().map_or(0, |outcome| outcome.tokens_spent);
        self.books
            .settle(estimate, spent, resource.spends_quota(), now);
        hold.settled = true;
        self.metrics
            .tokens
            .with_label_values(&[tier.as_str()])
            .inc_by(spent);
        let result = match attempt {
            Ok(outcome) => match outcome.misdirected_to() {
                Some(landed) => {
                    self.metrics
                        .alerts
                        .with_label_values(&["misdirected"])
                        .inc();
                    warn!(
                        resource = %resource.name,
                        landed_on = landed,
                        reachable = ?outcome.business_reachable,
                        routing_key = ?resource.routing_key,
                        "misdirected warmup: it landed on a worker business traffic does not reach"
                    );
                    WarmupResult::Misdirected { outcome, latency }
                }
                None => {
                    let misses = accounting::note_warmed(cell, now);
                    self.metrics.misses.inc_by(misses);
                    WarmupResult::Warmed { outcome, latency }
                }
            },
            Err(error) => {
                if tier != Tier::L0 {
                    warn!(resource = %resource.name, tier = %tier, %error, "warmup failed");
                }
                WarmupResult::Failed { error, latency }
            }
        };
        if tier == Tier::L0 && !result.is_warmed() {
            self.metrics.alerts.with_label_values(&["l0_failure"]).inc();
            error!(
                resource = %resource.name,
                result = result.label(),
                "L0 keep-alive failed: an always-warm resource may be cold"
            );
        }
        self.metrics
            .runs
            .with_label_values(&[tier.as_str(), resource.kind.as_str(), result.label()])
            .inc();
        self.metrics
            .duration
            .with_label_values(&[tier.as_str()])
            .observe(latency.as_secs_f64());
        result
    }

    fn skip(&self, resource: &WarmupResource, reason: SkipReason) -> WarmupResult {
        let tier = resource.tier.as_str();
        self.metrics
            .skipped
            .with_label_values(&[tier, reason.label()])
            .inc();
        self.metrics
            .runs
            .with_label_values(&[tier, resource.kind.as_str(), "skipped"])
            .inc();
        WarmupResult::Skipped(reason)
    }

    /// Judges expired hit windows and refreshes the accounting gauges.
    pub(crate) fn refresh_accounting(&self) -> u64 {
        let config = self.config.load();
        let now = self.clock.unix_millis();
        self.books.roll(now);
        let hit_window = secs_to_ms(config.hit_window_secs);
        let table = self.table.load();
        let mut misses = 0;
        let (mut hits, mut judged, mut candidates) = (0u64, 0u64, 0i64);
        for cell in table.cells() {
            misses += accounting::expire_pending(cell, now, hit_window);
            let cell_hits = cell.hits.load(Ordering::Relaxed);
            hits += cell_hits;
            judged += cell_hits + cell.misses.load(Ordering::Relaxed);
            if demotion_target(cell, &config).is_some() {
                candidates += 1;
            }
        }
        self.metrics.misses.inc_by(misses);
        if judged > 0 {
            self.metrics.hit_rate.set(hits as f64 / judged as f64);
        }
        if let Some(ratio) = self.books.cost_ratio() {
            self.metrics.cost_ratio.set(ratio);
        }
        self.metrics.demotion_candidates.set(candidates);
        self.metrics
            .budget_spent_tokens
            .set(i64::try_from(self.books.warmup_spent()).unwrap_or(i64::MAX));
        self.metrics
            .retry_amplification
            .set(self.books.retry_amplification());
        misses
    }

    /// Mean cost per quota-spending warmup: measured, or the configured estimates until
    /// enough warmups reported their usage.
    pub(crate) fn mean_cost(&self) -> f64 {
        let config = self.config.load();
        if let Some(measured) = self
            .books
            .measured_mean_cost(config.budget.mean_cost_min_samples)
        {
            return measured;
        }
        let table = self.table.load();
        let estimates: Vec<u64> = table
            .cells()
            .filter(|cell| cell.resource.spends_quota())
            .map(|cell| cell.resource.estimated_cost_tokens)
            .collect();
        if estimates.is_empty() {
            0.0
        } else {
            estimates.iter().sum::<u64>() as f64 / estimates.len() as f64
        }
    }
}

/// The tier a resource should move to when its hit rate stays under the threshold.
pub(crate) fn demotion_target(cell: &ResourceCell, config: &WarmupConfig) -> Option<Tier> {
    let rate = cell.hit_rate(config.demotion_min_samples)?;
    (rate < config.demotion_hit_rate)
        .then(|| cell.resource.tier.demoted())
        .flatten()
}
