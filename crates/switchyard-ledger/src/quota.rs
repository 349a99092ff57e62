//! The `QuotaLedger` the admission path calls on every request. Answers from the local
//! lease only: a reservation never waits on Raft.

use prometheus::IntCounter;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::{
    Purpose, QuotaError, QuotaLedger, QuotaScope, Reservation, ReserveFuture, SpendTags,
};

use crate::command::SplitKey;
use crate::lease::{Decision, LeaseTable, Refused};
use crate::metrics::LedgerMetrics;
use crate::spend::SpendAccumulator;

struct DecisionCounters {
    unbudgeted: IntCounter,
    lease: IntCounter,
    over: IntCounter,
    exhausted: IntCounter,
    unreachable: IntCounter,
    pending: IntCounter,
    renewal_late: IntCounter,
    rate_limited: IntCounter,
    concurrency_limited: IntCounter,
}

pub struct LedgerQuota {
    table: Arc<LeaseTable>,
    spend: Arc<SpendAccumulator>,
    metrics: Arc<LedgerMetrics>,
    decisions: DecisionCounters,
    /// `spend_tokens{purpose, override}` resolved once: index = purpose * 2 + override.
    spend_tokens: Vec<IntCounter>,
    /// Longest a request waits for a renewal its lease needs (`LeaseConfig::renewal_wait`).
    renewal_wait: Duration,
    waits_covered: IntCounter,
    waits_uncovered: IntCounter,
}

fn spend_index(purpose: Purpose, under_override: bool) -> usize {
    let purpose = Purpose::ALL.iter().position(|p| *p == purpose).unwrap_or(0);
    purpose * 2 + usize::from(under_override)
}

impl LedgerQuota {
    pub(crate) fn new(
        table: Arc<LeaseTable>,
        spend: Arc<SpendAccumulator>,
        metrics: Arc<LedgerMetrics>,
        renewal_wait: Duration,
    ) -> Self {
        let counter = |label: &str| metrics.reserve_decisions.with_label_values(&[label]);
        let decisions = DecisionCounters {
            unbudgeted: counter("unbudgeted"),
            lease: counter("lease"),
            over: counter("override"),
            exhausted: counter("exhausted"),
            unreachable: counter("unreachable"),
            pending: counter("pending"),
            renewal_late: counter("renewal_late"),
            rate_limited: counter("rate_limited"),
            concurrency_limited: counter("concurrency_limited"),
        };
        let spend_tokens = Purpose::ALL
            .iter()
            .flat_map(|purpose| {
                ["false", "true"].map(|over| {
                    metrics
                        .spend_tokens
                        .with_label_values(&[purpose.as_str(), over])
                })
            })
            .collect();
        let waits_covered = metrics.renewal_waits.with_label_values(&["covered"]);
        let waits_uncovered = metrics.renewal_waits.with_label_values(&["uncovered"]);
        Self {
            table,
            spend,
            metrics,
            decisions,
            spend_tokens,
            renewal_wait,
            waits_covered,
            waits_uncovered,
        }
    }

    pub fn leases(&self) -> &Arc<LeaseTable> {
        &self.table
    }
}

impl LedgerQuota {
    fn count(&self, decision: &Result<Decision, Refused>) {
        let counter = match decision {
            Ok(Decision::Override) => &self.decisions.over,
            Ok(Decision::Unbudgeted) => &self.decisions.unbudgeted,
            Ok(_) => &self.decisions.lease,
            Err(refused) => match refused.decision {
                Decision::Exhausted => &self.decisions.exhausted,
                Decision::Unreachable => &self.decisions.unreachable,
                Decision::RateLimited => &self.decisions.rate_limited,
                Decision::ConcurrencyLimited => &self.decisions.concurrency_limited,
                Decision::RenewalLate => &self.decisions.renewal_late,
                _ => &self.decisions.pending,
            },
        };
        counter.inc();
    }

    fn answer(
        tags: &SpendTags,
        tokens: u64,
        decision: Result<Decision, Refused>,
    ) -> Result<Reservation, QuotaError> {
        match decision {
            Ok(decision) => Ok(Reservation {
                tags: tags.clone(),
                tokens,
                under_override: decision == Decision::Override,
            }),
            Err(refused) => Err(refused.error),
        }
    }

    /// Tries the lease; while it answers `Pending` (a renewal this request needs is under
    /// way) or `Unreachable` (the last renewal found no leader: an election, or no quorum),
    /// waits for the keeper's next renewal answer and tries again, within `renewal_wait`. A
    /// leader killed under load is replaced within about an election timeout, and the
    /// survivors' renewals then succeed: refusing the requests of that gap would turn a
    /// failover into 503s although a quorum exists. Still uncovered at the deadline: 503
    /// unreachable if the ledger still cannot be reached; 429 if what the ledger could still
    /// grant does not cover the request (the rest is in other replicas' leases); else 503
    /// `renewal_late` (the renewal is slow, the budget is not spent).
    async fn reserve_waiting(
        &self,
        tags: &SpendTags,
        tokens: u64,
    ) -> Result<Reservation, QuotaError> {
        let deadline = tokio::time::Instant::now() + self.renewal_wait;
        let mut waited = false;
        loop {
            // Subscribed before trying, so an answer landing in between wakes the wait.
            let mut renewal = self.table.watch_answers();
            let decision = self.table.reserve(tags, tokens);
            let unreachable = matches!(&decision, Err(r) if r.decision == Decision::Unreachable);
            let pending = matches!(&decision, Err(r) if r.decision == Decision::Pending);
            if !pending && !unreachable {
                if waited && decision.is_ok() {
                    self.waits_covered.inc();
                } else if waited {
                    self.waits_uncovered.inc();
                }
                self.count(&decision);
                return Self::answer(tags, tokens, decision);
            }
            waited = true;
            let woke = tokio::time::timeout_at(deadline, renewal.changed()).await;
            if !matches!(woke, Ok(Ok(()))) {
                self.waits_uncovered.inc();
                let decision = if unreachable {
                    decision
                } else {
                    Err(self.table.held_elsewhere(tags, tokens))
                };
                self.count(&decision);
                return Self::answer(tags, tokens, decision);
            }
        }
    }
}

impl QuotaLedger for LedgerQuota {
    fn reserve(&self, tags: &SpendTags, tokens: u64) -> Result<Reservation, QuotaError> {
        let decision = self.table.reserve(tags, tokens);
        self.count(&decision);
        Self::answer(tags, tokens, decision)
    }

    fn reserve_or_wait<'a>(&'a self, tags: &'a SpendTags, tokens: u64) -> ReserveFuture<'a> {
        Box::pin(async move {
            let started = std::time::Instant::now();
            let answer = self.reserve_waiting(tags, tokens).await;
            self.metrics
                .reserve_seconds
                .observe(started.elapsed().as_secs_f64());
            answer
        })
    }

    fn settle(&self, reservation: Reservation, actual_tokens: u64) {
        let tags = &reservation.tags;
        let overrun = self.table.settle(
            tags,
            reservation.under_override,
            reservation.tokens,
            actual_tokens,
        );
        if overrun > 0 {
            self.metrics.settle_overrun_tokens.inc_by(overrun);
        }
        self.spend.record(
            SplitKey {
                caller: tags.scope.caller.clone(),
                purpose: tags.purpose,
                priority: tags.priority,
                under_override: reservation.under_override,
            },
            actual_tokens,
        );
        if let Some(counter) = self
            .spend_tokens
            .get(spend_index(tags.purpose, reservation.under_override))
        {
            counter.inc_by(actual_tokens);
        }
    }

    fn water_level(&self, scope: &QuotaScope) -> Option<f64> {
        self.table.water_level(scope)
    }
}
