//! Prometheus families of one ledger node, registered on the registry passed at start.

use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry,
};

/// Every branch the hot path and the lease keeper can take has a counter here.
pub struct LedgerMetrics {
    pub raft_role: IntGaugeVec,
    pub raft_term: IntGauge,
    pub commit_index: IntGauge,
    pub applied_index: IntGauge,
    pub last_log_index: IntGauge,
    pub replication_lag: IntGaugeVec,
    pub apply_seconds: Histogram,
    pub commit_seconds: Histogram,
    pub log_flush_seconds: Histogram,
    pub log_flush_entries: Histogram,
    pub invariant_violations: IntCounter,
    pub lease_requests: IntCounterVec,
    pub lease_local_expiries: IntCounter,
    pub lease_remaining_tokens: IntGaugeVec,
    pub lease_rate_share: IntGaugeVec,
    pub lease_utilisation: GaugeVec,
    pub budget_remaining_tokens: IntGaugeVec,
    pub renewal_waits: IntCounterVec,
    pub lease_concurrency_share: IntGaugeVec,
    pub applied_lease_events: IntGaugeVec,
    pub applied_expiry_charged_tokens: IntGauge,
    pub reserve_decisions: IntCounterVec,
    pub settle_overrun_tokens: IntCounter,
    pub spend_tokens: IntCounterVec,
    pub spend_batches: IntCounterVec,
    pub forwarded_writes: IntCounterVec,
    pub journal_sync_seconds: Histogram,
    pub journal_failures: IntCounter,
    pub journal_reclaims: IntCounter,
    pub applied_reclaimed_tokens: IntGauge,
    pub reserve_seconds: Histogram,
    pub peer_tls_refusals: IntCounter,
    pub sized_renewal_latency: Gauge,
    pub sized_journal_latency: Gauge,
}

pub const ROLES: [&str; 4] = ["leader", "follower", "candidate", "learner"];

#[derive(Debug, thiserror::Error)]
#[error("registering ledger metrics: {0}")]
pub struct MetricsError(#[from] prometheus::Error);

impl LedgerMetrics {
    pub fn register(registry: &Registry) -> Result<Self, MetricsError> {
        let metrics = Self {
            raft_role: IntGaugeVec::new(
                Opts::new(
                    "switchyard_ledger_raft_role",
                    "1 for the Raft role this node is in, 0 for the others",
                ),
                &["role"],
            )?,
            raft_term: IntGauge::new("switchyard_ledger_raft_term", "Current Raft term")?,
            commit_index: IntGauge::new(
                "switchyard_ledger_raft_commit_index",
                "Highest log index known committed",
            )?,
            applied_index: IntGauge::new(
                "switchyard_ledger_raft_applied_index",
                "Highest log index applied to the state machine",
            )?,
            last_log_index: IntGauge::new(
                "switchyard_ledger_raft_last_log_index",
                "Highest log index stored locally",
            )?,
            replication_lag: IntGaugeVec::new(
                Opts::new(
                    "switchyard_ledger_raft_replication_lag_entries",
                    "On the leader: entries a follower is behind the leader's log",
                ),
                &["follower"],
            )?,
            apply_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "switchyard_ledger_apply_seconds",
                    "Time to apply one log entry to the ledger state machine",
                )
                .buckets(vec![1e-6, 5e-6, 2e-5, 1e-4, 5e-4, 2e-3, 1e-2]),
            )?,
            commit_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "switchyard_ledger_commit_seconds",
                    "Time from proposing an entry on this node (as leader) until it is committed \
                     and applied",
                )
                .buckets(vec![
                    5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 3.0,
                ]),
            )?,
            log_flush_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "switchyard_ledger_log_flush_seconds",
                    "Time to append one batch of Raft log entries durably (a redb commit, an \
                     fsync); the Raft core waits for it",
                )
                .buckets(vec![
                    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                ]),
            )?,
            log_flush_entries: Histogram::with_opts(
                HistogramOpts::new(
                    "switchyard_ledger_log_flush_entries",
                    "Raft log entries made durable by one flush (batch size)",
                )
                .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]),
            )?,
            invariant_violations: IntCounter::new(
                "switchyard_ledger_invariant_violations_total",
                "Applied entries after which spent + lease holds exceeded a pool's limit",
            )?,
            lease_requests: IntCounterVec::new(
                Opts::new(
                    "switchyard_ledger_lease_requests_total",
                    "Lease acquisitions and renewals this node made, by outcome",
                ),
                &["outcome"],
            )?,
            lease_local_expiries: IntCounter::new(
                "switchyard_ledger_lease_local_expiries_total",
                "Local leases that reached their deadline before a renewal arrived",
            )?,
            lease_remaining_tokens: IntGaugeVec::new(
                Opts::new(
                    "switchyard_ledger_lease_remaining_tokens",
                    "Tokens left in this node's lease, per pool (budget scope or override)",
                ),
                &["pool"],
            )?,
            lease_rate_share: IntGaugeVec::new(
                Opts::new(
                    "switchyard_ledger_lease_rate_share_tokens_per_second",
                    "This node's share of a budget's fleet-wide token rate (-1: the budget sets none)",
                ),
                &["pool"],
            )?,
            lease_utilisation: GaugeVec::new(
                Opts::new(
                    "switchyard_ledger_lease_utilisation_ratio",
                    "Share of this node's latest lease grant already spent, per budget scope \
                     (0..1; what a replica holds unspent is 1 minus this times the grant)",
                ),
                &["pool"],
            )?,
            budget_remaining_tokens: IntGaugeVec::new(
                Opts::new(
                    "switchyard_ledger_budget_remaining_tokens",
                    "Tokens of a budget's period not yet spent fleet-wide (limit - spent, as \
                     applied here; leases held count as unspent), per budget scope",
                ),
                &["pool"],
            )?,
            renewal_waits: IntCounterVec::new(
                Opts::new(
                    "switchyard_ledger_renewal_waits_total",
                    "Requests that waited for a renewal of their lease, by whether the renewal \
                     covered them",
                ),
                &["outcome"],
            )?,
            lease_concurrency_share: IntGaugeVec::new(
                Opts::new(
                    "switchyard_ledger_lease_concurrency_share_requests",
                    "This node's share of a budget's fleet-wide concurrency (-1: the budget sets none)",
                ),
                &["pool"],
            )?,
            applied_lease_events: IntGaugeVec::new(
                Opts::new(
                    "switchyard_ledger_applied_lease_events",
                    "Lease grants, denials and ledger-side expiries in the applied state, fleet-wide \
                     (replicated counters: the same on every replica at the same applied index)",
                ),
                &["event"],
            )?,
            applied_expiry_charged_tokens: IntGauge::new(
                "switchyard_ledger_applied_expiry_charged_tokens",
                "Tokens charged in full because a lease expired unrenewed (fleet-wide, applied state)",
            )?,
            reserve_decisions: IntCounterVec::new(
                Opts::new(
                    "switchyard_ledger_reserve_decisions_total",
                    "Hot-path reservations by decision",
                ),
                &["decision"],
            )?,
            settle_overrun_tokens: IntCounter::new(
                "switchyard_ledger_settle_overrun_tokens_total",
                "Tokens settled beyond a lease's debt allowance (estimate far below the real count)",
            )?,
            spend_tokens: IntCounterVec::new(
                Opts::new(
                    "switchyard_ledger_spend_tokens_total",
                    "Tokens settled on this node, by purpose and override",
                ),
                &["purpose", "override"],
            )?,
            spend_batches: IntCounterVec::new(
                Opts::new(
                    "switchyard_ledger_spend_batches_total",
                    "Spend report batches this node proposed, by outcome",
                ),
                &["outcome"],
            )?,
            forwarded_writes: IntCounterVec::new(
                Opts::new(
                    "switchyard_ledger_writes_total",
                    "Ledger writes issued by this node, by path and outcome",
                ),
                &["path", "outcome"],
            )?,
            journal_sync_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "switchyard_ledger_journal_sync_seconds",
                    "Time to append and sync one batch of spend-journal ceilings",
                )
                .buckets(vec![
                    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                ]),
            )?,
            journal_failures: IntCounter::new(
                "switchyard_ledger_journal_failures_total",
                "Spend-journal syncs that failed (reservations past the ceiling wait)",
            )?,
            journal_reclaims: IntCounter::new(
                "switchyard_ledger_journal_reclaims_total",
                "Leases of a previous process reported from the spend journal after a restart",
            )?,
            reserve_seconds: Histogram::with_opts(
                HistogramOpts::new(
                    "switchyard_ledger_reserve_seconds",
                    "Time a request spends reserving its estimate from the quota ledger, waits \
                     for a lease renewal or a journal sync included",
                )
                .buckets(vec![
                    1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2,
                    0.1, 0.25, 0.5, 1.0, 2.5,
                ]),
            )?,
            applied_reclaimed_tokens: IntGauge::new(
                "switchyard_ledger_applied_reclaimed_tokens",
                "Tokens of expired, fenced or orphaned leases given back to their pools once the holder reported (replicated count)",
            )?,
            peer_tls_refusals: IntCounter::new(
                "switchyard_ledger_peer_tls_refusals_total",
                "Connections to the Raft/ledger port refused because the TLS handshake failed \
                 (no certificate of the cluster CA, or too slow)",
            )?,
            sized_renewal_latency: Gauge::new(
                "switchyard_ledger_lease_sized_renewal_latency_seconds",
                "Renewal commit latency leases are sized for: the decaying maximum of this \
                 node's recent renewals",
            )?,
            sized_journal_latency: Gauge::new(
                "switchyard_ledger_lease_sized_journal_latency_seconds",
                "Spend-journal sync latency lease ceilings are sized for: the decaying maximum \
                 of this node's recent syncs",
            )?,
        };
        registry.register(Box::new(metrics.raft_role.clone()))?;
        registry.register(Box::new(metrics.raft_term.clone()))?;
        registry.register(Box::new(metrics.commit_index.clone()))?;
        registry.register(Box::new(metrics.applied_index.clone()))?;
        registry.register(Box::new(metrics.last_log_index.clone()))?;
        registry.register(Box::new(metrics.replication_lag.clone()))?;
        registry.register(Box::new(metrics.apply_seconds.clone()))?;
        registry.register(Box::new(metrics.commit_seconds.clone()))?;
        registry.register(Box::new(metrics.log_flush_seconds.clone()))?;
        registry.register(Box::new(metrics.log_flush_entries.clone()))?;
        registry.register(Box::new(metrics.invariant_violations.clone()))?;
        registry.register(Box::new(metrics.lease_requests.clone()))?;
        registry.register(Box::new(metrics.lease_local_expiries.clone()))?;
        registry.register(Box::new(metrics.lease_remaining_tokens.clone()))?;
        registry.register(Box::new(metrics.lease_rate_share.clone()))?;
        registry.register(Box::new(metrics.lease_concurrency_share.clone()))?;
        registry.register(Box::new(metrics.lease_utilisation.clone()))?;
        registry.register(Box::new(metrics.budget_remaining_tokens.clone()))?;
        registry.register(Box::new(metrics.renewal_waits.clone()))?;
        registry.register(Box::new(metrics.applied_lease_events.clone()))?;
        registry.register(Box::new(metrics.applied_expiry_charged_tokens.clone()))?;
        registry.register(Box::new(metrics.reserve_decisions.clone()))?;
        registry.register(Box::new(metrics.settle_overrun_tokens.clone()))?;
        registry.register(Box::new(metrics.spend_tokens.clone()))?;
        registry.register(Box::new(metrics.spend_batches.clone()))?;
        registry.register(Box::new(metrics.forwarded_writes.clone()))?;
        registry.register(Box::new(metrics.journal_sync_seconds.clone()))?;
        registry.register(Box::new(metrics.journal_failures.clone()))?;
        registry.register(Box::new(metrics.journal_reclaims.clone()))?;
        registry.register(Box::new(metrics.applied_reclaimed_tokens.clone()))?;
        registry.register(Box::new(metrics.reserve_seconds.clone()))?;
        registry.register(Box::new(metrics.peer_tls_refusals.clone()))?;
        registry.register(Box::new(metrics.sized_renewal_latency.clone()))?;
        registry.register(Box::new(metrics.sized_journal_latency.clone()))?;
        Ok(metrics)
    }

    /// Metrics registered on a private registry (tests, benches).
    pub fn unregistered() -> Result<Self, MetricsError> {
        Self::register(&Registry::new())
    }
}
