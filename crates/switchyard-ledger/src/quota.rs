//! The `QuotaLedger` the admission path calls on every request. Answers from the local
//! lease only: a reservation never waits on Raft.

use prometheus::IntCounter;
use std::sync::Arc;
use switchyard_core::{Purpose, QuotaError, QuotaLedger, QuotaScope, Reservation, SpendTags};

use crate::command::SplitKey;
use crate::lease::{Decision, LeaseTable};
use crate::metrics::LedgerMetrics;
use crate::spend::SpendAccumulator;

struct DecisionCounters {
    unbudgeted: IntCounter,
    lease: IntCounter,
    over: IntCounter,
    exhausted: IntCounter,
    unreachable: IntCounter,
    pending: IntCounter,
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
    ) -> Self {
        let counter = |label: &str| metrics.reserve_decisions.with_label_values(&[label]);
        let decisions = DecisionCounters {
            unbudgeted: counter("unbudgeted"),
            lease: counter("lease"),
            over: counter("override"),
            exhausted: counter("exhausted"),
            unreachable: counter("unreachable"),
            pending: counter("pending"),
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
        Self {
            table,
            spend,
            metrics,
            decisions,
            spend_tokens,
        }
    }

    pub fn leases(&self) -> &Arc<LeaseTable> {
        &self.table
    }
}

impl QuotaLedger for LedgerQuota {
    fn reserve(&self, tags: &SpendTags, tokens: u64) -> Result<Reservation, QuotaError> {
        let decision = self.table.reserve(tags, tokens);
        let counter = match decision {
            Ok(Decision::Override) => &self.decisions.over,
            Ok(Decision::Unbudgeted) => &self.decisions.unbudgeted,
            Ok(_) => &self.decisions.lease,
            Err(ref refused) => match refused.decision {
                Decision::Exhausted => &self.decisions.exhausted,
                Decision::Unreachable => &self.decisions.unreachable,
                Decision::RateLimited => &self.decisions.rate_limited,
                Decision::ConcurrencyLimited => &self.decisions.concurrency_limited,
                _ => &self.decisions.pending,
            },
        };
        counter.inc();
        match decision {
            Ok(decision) => Ok(Reservation {
                tags: tags.clone(),
                tokens,
                under_override: decision == Decision::Override,
            }),
            Err(refused) => Err(refused.error),
        }
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
