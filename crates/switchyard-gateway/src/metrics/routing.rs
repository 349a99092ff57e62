//! Routing-structure metrics, read from the policy's own counters at scrape time so the
//! router crate stays free of a metrics registry.

use prometheus::{Gauge, IntCounter, IntGauge, Registry};
use switchyard_router::RoutingStats;

pub struct RoutingMetrics {
    ring_workers: IntGauge,
    ring_vnodes: IntGauge,
    keys_moved_ratio: Gauge,
    placement_replicas: Gauge,
    openings_met_ratio: Gauge,
    plan_moved_ratio: Gauge,
    plan_moved_beyond_membership_change_ratio: Gauge,
    hot_keys_spread: IntGauge,
    placement_overrides: IntGauge,
    tree_bytes: IntGauge,
    membership_changes: IntCounter,
    hot_spread_decisions: IntCounter,
    migrations: IntCounter,
    load_moves: IntCounter,
    events_applied: IntCounter,
    events_ignored: IntCounter,
}

fn gauge(registry: &Registry, name: &str, help: &str) -> prometheus::Result<IntGauge> {
    let g = IntGauge::new(name, help)?;
    registry.register(Box::new(g.clone()))?;
    Ok(g)
}

fn counter(registry: &Registry, name: &str, help: &str) -> prometheus::Result<IntCounter> {
    let c = IntCounter::new(name, help)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}

/// Moves a counter up to the policy's running total.
fn catch_up(counter: &IntCounter, total: u64) {
    let seen = counter.get();
    if total > seen {
        counter.inc_by(total - seen);
    }
}

impl RoutingMetrics {
    pub fn new(registry: &Registry) -> prometheus::Result<Self> {
        let keys_moved_ratio = Gauge::new(
            "switchyard_routing_ring_keys_moved_ratio",
            "Share of the hash space that changed owner at the last membership change.",
        )?;
        registry.register(Box::new(keys_moved_ratio.clone()))?;
        let placement_replicas = Gauge::new(
            "switchyard_routing_placement_replicas",
            "Replicas placing alongside this one (itself included) as the replicated affinity \
             events show; a first turn's load bound scales local in-flight counts by it.",
        )?;
        registry.register(Box::new(placement_replicas.clone()))?;
        let openings_met_ratio = Gauge::new(
            "switchyard_routing_openings_met_ratio",
            "Share of the conversations this replica met lately that it met at their opening; \
             near 1 (or in a group sharing placements) its first turns may balance their group \
             workers' cache writes.",
        )?;
        registry.register(Box::new(openings_met_ratio.clone()))?;
        let plan_moved_ratio = Gauge::new(
            "switchyard_routing_plan_moved_ratio",
            "Of the busiest system prompts' conversation traffic, the share whose worker the \
             last re-plan of their worker groups changed (sampled). Where replicas share no \
             placements, those conversations' next turns move.",
        )?;
        registry.register(Box::new(plan_moved_ratio.clone()))?;
        let plan_moved_beyond_membership_change_ratio = Gauge::new(
            "switchyard_routing_plan_moved_beyond_membership_change_ratio",
            "Of the same traffic, the share the re-plan on the last worker join or leave moved \
             between workers there before and after it (beyond what the change forces), for \
             the conversations opened after it: those in progress keep the plan they opened \
             under (a Raft group's replicated placements, or each replica's plan before the \
             change).",
        )?;
        registry.register(Box::new(plan_moved_beyond_membership_change_ratio.clone()))?;
        Ok(Self {
            ring_workers: gauge(
                registry,
                "switchyard_routing_ring_workers",
                "Workers on the hash ring.",
            )?,
            ring_vnodes: gauge(
                registry,
                "switchyard_routing_ring_vnodes",
                "Virtual nodes on the hash ring.",
            )?,
            keys_moved_ratio,
            placement_replicas,
            openings_met_ratio,
            plan_moved_ratio,
            plan_moved_beyond_membership_change_ratio,
            hot_keys_spread: gauge(
                registry,
                "switchyard_routing_hot_keys_spread",
                "Hot routing keys currently spread over several workers.",
            )?,
            placement_overrides: gauge(
                registry,
                "switchyard_routing_placement_overrides",
                "Prefixes placed away from their hash position (load moves, migrations).",
            )?,
            tree_bytes: gauge(
                registry,
                "switchyard_routing_prefix_tree_bytes",
                "Prompt bytes held by the cache-aware prefix tree.",
            )?,
            membership_changes: counter(
                registry,
                "switchyard_routing_membership_changes_total",
                "Ring rebuilds after workers joined or left.",
            )?,
            hot_spread_decisions: counter(
                registry,
                "switchyard_routing_hot_spread_decisions_total",
                "Requests routed by the hot-key secondary hash.",
            )?,
            migrations: counter(
                registry,
                "switchyard_routing_affinity_migrations_total",
                "Prefix affinities moved off a filtered holder.",
            )?,
            load_moves: counter(
                registry,
                "switchyard_routing_load_moves_total",
                "New prefixes placed off their hash position because of load.",
            )?,
            events_applied: counter(
                registry,
                "switchyard_routing_affinity_events_applied_total",
                "Affinity events from other replicas applied.",
            )?,
            events_ignored: counter(
                registry,
                "switchyard_routing_affinity_events_ignored_total",
                "Affinity events ignored (unknown worker, unsupported policy).",
            )?,
        })
    }

    pub fn update(&self, stats: &RoutingStats) {
        self.ring_workers.set(stats.ring_workers as i64);
        self.ring_vnodes.set(stats.ring_vnodes as i64);
        self.keys_moved_ratio
            .set(stats.keys_moved_on_last_membership_change);
        self.placement_replicas.set(stats.placement_replicas);
        self.openings_met_ratio.set(stats.openings_met_share);
        self.plan_moved_ratio.set(stats.plan_moved_share);
        self.plan_moved_beyond_membership_change_ratio
            .set(stats.plan_moved_beyond_membership_change);
        self.hot_keys_spread.set(stats.hot_keys_spread as i64);
        self.placement_overrides
            .set(stats.placement_overrides as i64);
        self.tree_bytes.set(stats.tree_bytes as i64);
        catch_up(&self.membership_changes, stats.membership_changes);
        catch_up(&self.hot_spread_decisions, stats.hot_spread_decisions);
        catch_up(&self.migrations, stats.migrations);
        catch_up(&self.load_moves, stats.load_moves);
        catch_up(&self.events_applied, stats.affinity_events_applied);
        catch_up(&self.events_ignored, stats.affinity_events_ignored);
    }
}
