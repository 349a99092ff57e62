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
        let now = self.table.clock().now();
        let metrics = &self.core.metrics;
        metrics
            .sized_renewal_latency
            .set(self.table.renewal_latency().current(now).as_secs_f64());
        metrics
            .sized_journal_latency
            .set(self.table.journal_latency().current(now).as_secs_f64());
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

    /// The demand to ask for if the lease should be renewed now. Also hands the lease its
    /// latency covers (tokens spent during a few recent renewals and journal syncs), which
    /// move its renew point and journal step between keeper passes.
    fn due(&self, lease: &LocalLease, now: Instant) -> Option<u64> {
        let s = lease.snapshot();
        let window = s
            .renewed_at
            .map(|at| now.saturating_duration_since(at))
            .unwrap_or(self.config.check_interval)
            .max(self.config.check_interval);
        let rate = s.asked as f64 / window.as_secs_f64();
        let sizing = sizing(
            &self.config,
            rate,
            self.table.renewal_latency().current(now),
            self.table.journal_latency().current(now),
        );
        lease.set_cover(sizing.renew_cover, sizing.journal_cover);
        if s.next_attempt.is_some_and(|at| now < at) {
            return None;
        }
        let is_override = matches!(lease.pool, PoolId::Override(_));
        if is_override && s.epoch.is_none() && s.asked == 0 {
            return None;
        }
        let floor = if is_override {
            s.asked.max(1)
        } else {
            self.config.min_demand_tokens
        };
        let demand = sizing.demand.max(floor);
        let live = s.deadline.is_some_and(|d| now < d);
        let old = s.renewed_at.is_none_or(|at| {
            now.saturating_duration_since(at)
                >= self.config.ttl.mul_f64(self.config.renew_after_fraction)
        });
        let used_enough = lease.snapshot().renewal_due();
        if s.epoch.is_none() || !live || old || s.starved || used_enough {
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
        if result.is_ok() {
            // A committed answer, granted or not: how long this node's renewals take now. A
            // write that timed out says nothing about the next commit (an election, a lost
            // leader) and would widen every later lease for the decay's whole half-life.
            let answered = clock.now();
            self.table
                .renewal_latency()
                .observe(answered.saturating_duration_since(sent_at), answered);
        }
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
        let clock = self.table.clock();
        let started = clock.now();
        match self.journal.append(vec![record]).await {
            Ok(()) => {
                let synced = clock.now();
                self.table
                    .journal_latency()
                    .observe(synced.saturating_duration_since(started), synced);
                ceiling
            }
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

/// What a lease is sized for at an observed spend `rate` (tokens/s) and the node's recent
/// renewal and journal-sync latencies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Sizing {
    /// Tokens to ask for: `spend_window` plus `renew_cover`'s time of spend, × headroom.
    pub demand: u64,
    /// Renew before less than this is left of a grant: the spend during a few renewals
    /// and the journal syncs that make a grant's fresh tokens spendable.
    pub renew_cover: u64,
    /// Keep the journal's ceiling at least this far ahead of the spend.
    pub journal_cover: u64,
}

pub(crate) fn sizing(
    config: &LeaseConfig,
    rate: f64,
    renewal_latency: Duration,
    journal_latency: Duration,
) -> Sizing {
    let window = config.spend_window.min(config.ttl).as_secs_f64();
    // A lease cannot spend past its local deadline (TTL less the safety margin), so asking
    // for more time than that only strands tokens: the extra stops there. (Stopping it at
    // one more spend window let a 600 ms journal sync stall reservations again.)
    let usable = config
        .ttl
        .saturating_sub(config.safety_margin)
        .as_secs_f64();
    let most = (usable - window).max(0.0);
    let cover = |latency: Duration| (latency.as_secs_f64() * config.latency_cover).min(most);
    // A grant's new tokens are spendable only once the journal has synced a ceiling past
    // the old grant, which starts when the grant arrives: the lease renews early enough to
    // cover a renewal and then a sync. Covering the renewal alone stalled reservations on
    // the ceiling whenever a sync took longer than a renewal (a slow journal disk beside a
    // quick Raft commit).
    let renewal_cover = cover(renewal_latency.saturating_add(journal_latency));
    // Float to integer casts saturate (and NaN is 0): a misconfigured factor cannot panic.
    let tokens = |seconds: f64| (rate * seconds).max(0.0).round() as u64;
    Sizing {
        demand: tokens((window + renewal_cover) * config.demand_headroom),
        renew_cover: tokens(renewal_cover),
        journal_cover: tokens(cover(journal_latency)),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaseConfig {
        LeaseConfig {
            spend_window: Duration::from_secs(2),
            demand_headroom: 1.5,
            latency_cover: 3.0,
            ..LeaseConfig::default()
        }
    }

    fn ms(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn demand_covers_the_window_plus_a_few_renewal_latencies() {
        let config = config();
        // 100 tokens/s, nothing observed: the spend window × headroom.
        let quiet = sizing(&config, 100.0, Duration::ZERO, Duration::ZERO);
        assert_eq!(
            (quiet.demand, quiet.renew_cover, quiet.journal_cover),
            (300, 0, 0)
        );
        // Commits of 200 ms: 0.6 s more spend, renewed before 60 tokens are left.
        let slow = sizing(&config, 100.0, ms(200), Duration::ZERO);
        assert_eq!((slow.demand, slow.renew_cover), (390, 60));
        // A pathological commit adds at most what the lease could spend before its local
        // deadline (TTL 10 s less the 1 s margin, 7 s past the window).
        let stuck = sizing(&config, 100.0, ms(5_000), Duration::ZERO);
        assert_eq!((stuck.demand, stuck.renew_cover), (1_350, 700));
    }

    #[test]
    fn the_journal_cover_is_the_spend_during_a_few_syncs() {
        let config = config();
        let slow_disk = sizing(&config, 1_000.0, Duration::ZERO, ms(150));
        assert_eq!(slow_disk.journal_cover, 450);
        // The fresh tokens of a renewal wait for a sync: the lease renews before less than
        // a few syncs of spend are left, and asks for that much more.
        assert_eq!((slow_disk.renew_cover, slow_disk.demand), (450, 3_675));
        let both = sizing(&config, 1_000.0, ms(100), ms(150));
        assert_eq!((both.renew_cover, both.journal_cover), (750, 450));
        let stuck = sizing(&config, 1_000.0, Duration::ZERO, ms(9_000));
        assert_eq!(
            stuck.journal_cover, 7_000,
            "at most the usable TTL past the window"
        );
    }

    #[test]
    fn a_misconfigured_factor_does_not_panic() {
        let config = LeaseConfig {
            latency_cover: f64::NAN,
            demand_headroom: -1.0,
            ..config()
        };
        let sized = sizing(&config, 100.0, ms(200), ms(200));
        assert_eq!(sized.demand, 0);
    }
}
