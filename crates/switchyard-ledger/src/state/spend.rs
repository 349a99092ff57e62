//! Spend splits: nodes' batches folded into per-minute series per (caller, purpose, priority,
//! override?), plus running totals and the two fleet-wide ratios operators watch.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use switchyard_core::Purpose;

use crate::command::{NodeId, SpendReport, SpendTotals, SplitKey};

/// Minutes of per-minute series kept in the replicated state.
pub const SPLIT_RETENTION_MINUTES: u64 = 180;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpendLedger {
    /// Highest sequence number applied per (node, boot): a repeated batch is ignored. Keyed
    /// by boot rather than ordered by it, so a node whose clock went back still reports.
    last_batch: BTreeMap<(NodeId, u64), u64>,
    pub minutes: BTreeMap<u64, BTreeMap<SplitKey, SpendTotals>>,
    pub totals: BTreeMap<SplitKey, SpendTotals>,
}

/// Cluster-wide figures derived from the totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendRatios {
    pub total_tokens: u64,
    pub total_requests: u64,
    /// Warmup tokens over all tokens.
    pub warmup_cost_ratio: f64,
    /// All requests over first attempts (requests not tagged `retry`); 1.0 with no retries.
    pub retry_amplification: f64,
    /// Tokens spent under an approved override.
    pub override_tokens: u64,
}

impl SpendLedger {
    /// Applies a batch unless it was already applied; answers whether it was new.
    pub fn apply(&mut self, report: &SpendReport) -> bool {
        let key = (report.node, report.boot_id);
        if self
            .last_batch
            .get(&key)
            .is_some_and(|last| *last >= report.seq)
        {
            return false;
        }
        self.last_batch.insert(key, report.seq);
        self.forget_old_boots(report.node);
        let minute = self.minutes.entry(report.minute).or_default();
        for (split, totals) in &report.lines {
            minute.entry(split.clone()).or_default().add(*totals);
            self.totals.entry(split.clone()).or_default().add(*totals);
        }
        if let Some(newest) = self.minutes.keys().next_back().copied() {
            let oldest_kept = newest.saturating_sub(SPLIT_RETENTION_MINUTES);
            self.minutes = self.minutes.split_off(&oldest_kept);
        }
        true
    }

    /// Keeps the sequence numbers of a node's most recent boots only (a dead process sends
    /// nothing more); which ones go is decided by the state alone, so replicas agree.
    fn forget_old_boots(&mut self, node: NodeId) {
        const BOOTS_KEPT: usize = 8;
        let boots: Vec<u64> = self
            .last_batch
            .range((node, 0)..=(node, u64::MAX))
            .map(|((_, boot), _)| *boot)
            .collect();
        for boot in boots.iter().take(boots.len().saturating_sub(BOOTS_KEPT)) {
            self.last_batch.remove(&(node, *boot));
        }
    }

    /// `(node, boot, highest sequence applied)` for every reporter still remembered.
    pub fn applied_batches(&self) -> impl Iterator<Item = (NodeId, u64, u64)> + '_ {
        self.last_batch
            .iter()
            .map(|((node, boot), seq)| (*node, *boot, *seq))
    }

    pub fn ratios(&self) -> SpendRatios {
        let mut ratios = SpendRatios::default();
        let mut warmup_tokens = 0u64;
        let mut first_attempts = 0u64;
        for (key, totals) in &self.totals {
            ratios.total_tokens += totals.tokens;
            ratios.total_requests += totals.requests;
            if key.purpose == Purpose::Warmup {
                warmup_tokens += totals.tokens;
            }
            if key.purpose != Purpose::Retry {
                first_attempts += totals.requests;
            }
            if key.under_override {
                ratios.override_tokens += totals.tokens;
            }
        }
        if ratios.total_tokens > 0 {
            ratios.warmup_cost_ratio = warmup_tokens as f64 / ratios.total_tokens as f64;
        }
        ratios.retry_amplification = if first_attempts > 0 {
            ratios.total_requests as f64 / first_attempts as f64
        } else {
            1.0
        };
        ratios
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::Priority;

    fn line(purpose: Purpose, tokens: u64, requests: u64) -> (SplitKey, SpendTotals) {
        (
            SplitKey {
                caller: "a".into(),
                purpose,
                priority: Priority::P1,
                under_override: false,
            },
            SpendTotals { tokens, requests },
        )
    }

    #[test]
    fn batches_are_idempotent_and_ratios_follow_the_totals() {
        let mut ledger = SpendLedger::default();
        let report = SpendReport {
            node: 1,
            boot_id: 7,
            seq: 1,
            minute: 100,
            lines: vec![
                line(Purpose::Business, 700, 8),
                line(Purpose::Warmup, 300, 1),
                line(Purpose::Retry, 0, 1),
            ],
        };
        assert!(ledger.apply(&report));
        assert!(!ledger.apply(&report), "the same batch twice counts once");
        let ratios = ledger.ratios();
        assert_eq!(ratios.total_tokens, 1000);
        assert!((ratios.warmup_cost_ratio - 0.3).abs() < 1e-9);
        assert!((ratios.retry_amplification - 10.0 / 9.0).abs() < 1e-9);
        let restarted = SpendReport {
            boot_id: 8,
            seq: 1,
            ..report
        };
        assert!(
            ledger.apply(&restarted),
            "a new boot starts a fresh sequence"
        );
        assert_eq!(
            ledger.minutes[&100].values().map(|t| t.tokens).sum::<u64>(),
            2000
        );
    }
}
