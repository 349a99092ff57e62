//! The lease keeper: an owned task that keeps one lease per budget (and per override the
//! node has demand for), renews each well before expiry or once half of it is used, sizes
//! requests from observed demand, and releases everything on shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

use super::core::LedgerCore;
use crate::command::{Command, CommandResponse, LeaseDenied, LeaseGrant, PoolId};
use crate::config::LeaseConfig;
use crate::error::LedgerError;
use crate::journal::{Record, SpendJournal};
use crate::lease::{LeaseTable, LocalLease, UNLIMITED_SHARE};

pub(crate) struct LeaseKeeper {
    pub core: Arc<LedgerCore>,
    pub table: Arc<LeaseTable>,
    pub config: LeaseConfig,
    pub journal: Arc<SpendJournal>,
}

impl LeaseKeeper {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.config.check_interval) => {}
                _ = self.table.kicked().notified() => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
            self.pass().await;
        }
        self.release_all().await;
    }

    /// One look at every lease. Due renewals go out together: while no leader answers
    /// (an election), one waits up to the write timeout, and a lease running dry must not
    /// queue behind another pool's stalled renewal.
    pub async fn pass(&self) {
        self.table.sync_with_view();
        let set = self.table.set();
        let leases: Vec<Arc<LocalLease>> = set.all().cloned().collect();
        drop(set);
        let now = self.table.clock().now();
        let mut renewals = Vec::new();
        for lease in &leases {
            if lease.note_expiry(now) {
                self.core.metrics.lease_local_expiries.inc();
            }
            if let Some(demand) = self.due(lease, now) {
                renewals.push(self.renew(lease, demand));
            }
        }
        futures_util::future::join_all(renewals).await;
        for lease in &leases {
            self.publish_lease(lease);
        }
        self.publish_applied_counters();
    }

    fn publish_lease(&self, lease: &LocalLease) {
        let metrics = &self.core.metrics;
        let label = pool_label(&lease.pool);
        let snapshot = lease.snapshot();
        let remaining = snapshot.remaining(self.table.clock().now());
        metrics
            .lease_remaining_tokens
            .with_label_values(&[&label])
            .set(gauge(remaining));
        if !matches!(lease.pool, PoolId::Override(_)) {
            metrics
                .lease_utilisation
                .with_label_values(&[&label])
                .set(snapshot.utilisation());
            if let Some(pool) = self.table.view().pool(&lease.pool) {
                metrics
                    .budget_remaining_tokens
                    .with_label_values(&[&label])
                    .set(gauge(pool.limit.saturating_sub(pool.spent)));
            }
            let shares = lease.shares();
            let share = |value: u64| match value {
                UNLIMITED_SHARE => -1,
                value => gauge(value),
            };
            metrics
                .lease_rate_share
                .with_label_values(&[&label])
                .set(share(shares.rate_per_s()));
            metrics
                .lease_concurrency_share
                .with_label_values(&[&label])
                .set(share(shares.concurrency()));
        }
    }

    /// The replicated lease counters as of the applied index this node has reached.
    fn publish_applied_counters(&self) {
        let counters = self.table.view().counters;
        let metrics = &self.core.metrics;
        for (event, value) in [
            ("grant", counters.lease_grants),
            ("denial", counters.lease_denials),
            ("expiry", counters.lease_expiries),
        ] {
            metrics
                .applied_lease_events
                .with_label_values(&[event])
                .set(gauge(value));
        }
        metrics
            .applied_expiry_charged_tokens
            .set(gauge(counters.lease_tokens_charged_on_expiry));
        metrics
            .applied_reclaimed_tokens
            .set(gauge(counters.lease_tokens_reclaimed));
    }

    /// The demand to ask for if the lease should be renewed now.
    fn due(&self, lease: &LocalLease, now: Instant) -> Option<u64> {
        let s = lease.snapshot();
        if s.next_attempt.is_some_and(|at| now < at) {
            return None;
        }
        let is_override = matches!(lease.pool, PoolId::Override(_));
        if is_override && s.epoch.is_none() && s.asked == 0 {
            return None;
        }
        let window = s
            .renewed_at
            .map(|at| now.saturating_duration_since(at))
            .unwrap_or(self.config.check_interval)
            .max(self.config.check_interval);
        let sized_for = self.config.spend_window.min(self.config.ttl).as_secs_f64();
        let per_window =
            s.asked as f64 / window.as_secs_f64() * sized_for * self.config.demand_headroom;
        let floor = if is_override {
            s.asked.max(1)
        } else {
            self.config.min_demand_tokens
        };
        let demand = (per_window as u64).max(floor);
        let live = s.deadline.is_some_and(|d| now < d);
        let old = s.renewed_at.is_none_or(|at| {
            now.saturating_duration_since(at)
                >= self.config.ttl.mul_f64(self.config.renew_after_fraction)
        });
        let half_used = s.used_total.saturating_sub(s.used_at_renewal) * 2
            >= s.granted_at_renewal
                .saturating_sub(s.used_at_renewal)
                .max(1);
        if s.epoch.is_none() || !live || old || s.starved || half_used {
            if is_override && !live && s.asked == 0 {
                return None;
            }
            return Some(demand);
        }
        None
    }

    async fn renew(&self, lease: &LocalLease, demand: u64) {
        let clock = self.table.clock();
        let sent_at = clock.now();
        let request = lease.prepare_renewal(self.core.id, demand, self.config.ttl, sent_at);
        let result = self.core.write(Command::AcquireLease(request)).await;
        let retry_at = clock.now() + self.config.ttl.mul_f64(self.config.renew_after_fraction);
        let outcome = match &result {
            Ok(CommandResponse::Lease(Ok(grant))) => {
                let journaled = self.first_ceiling(lease, grant).await;
                lease.apply_grant(
                    grant,
                    sent_at,
                    self.config.safety_margin,
                    clock.now(),
                    journaled,
                );
                self.table.journal_kicked().notify_one();
                "granted"
            }
            Ok(CommandResponse::Lease(Err(LeaseDenied::Exhausted { .. }))) => {
                lease.clear(retry_at);
                "denied_exhausted"
            }
            Ok(CommandResponse::Lease(Err(LeaseDenied::PoolClosed))) => "denied_closed",
            Ok(CommandResponse::Lease(Err(LeaseDenied::NoSuchPool))) => {
                lease.clear(retry_at);
                "denied_no_pool"
            }
            Ok(_) => "unexpected",
            Err(e) => {
                tracing::debug!(error = %e, pool = ?lease.pool, "lease renewal failed");
                "unreachable"
            }
        };
        self.table
            .set_reachable(!matches!(&result, Err(e) if LedgerError::is_unavailable(e)));
        self.table.note_answer();
        self.core
            .metrics
            .lease_requests
            .with_label_values(&[outcome])
            .inc();
    }

    /// For a grant of a new epoch, syncs its first journal ceiling before it is installed,
    /// so the first requests under it need not wait for the journal writer. Answers the
    /// ceiling synced (0 if none: the writer raises it when a reservation asks).
    async fn first_ceiling(&self, lease: &LocalLease, grant: &LeaseGrant) -> u64 {
        if lease.snapshot().epoch == Some(grant.epoch) {
            return 0;
        }
        let ceiling = lease.first_ceiling(grant);
        let record = Record::Ceiling {
            pool: lease.pool.clone(),
            epoch: grant.epoch,
            ceiling,
        };
        match self.journal.append(vec![record]).await {
            Ok(()) => ceiling,
            Err(e) => {
                self.core.metrics.journal_failures.inc();
                tracing::warn!(error = %e, "spend journal sync failed for a new lease");
                0
            }
        }
    }

    /// Stops spending every lease and hands the unused part back (best effort).
    pub async fn release_all(&self) {
        let set = self.table.set();
        let leases: Vec<Arc<LocalLease>> = set.all().cloned().collect();
        drop(set);
        for lease in leases {
            let Some((epoch, used_total)) = lease.close_for_release() else {
                continue;
            };
            let command = Command::ReleaseLease {
                node: self.core.id,
                pool: lease.pool.clone(),
                epoch,
                used_total,
            };
            let released = tokio::time::timeout(Duration::from_secs(2), self.core.write(command));
            let outcome = match released.await {
                Ok(Ok(_)) => "released",
                _ => "release_failed",
            };
            self.core
                .metrics
                .lease_requests
                .with_label_values(&[outcome])
                .inc();
        }
    }
}

fn gauge(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn pool_label(pool: &PoolId) -> String {
    match pool {
        PoolId::Budget(scope) => scope.to_string(),
        PoolId::Override(id) => format!("override-{id}"),
        PoolId::Period(scope, period_ms) => format!("{scope}@{period_ms}ms"),
    }
}
