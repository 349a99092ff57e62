//! Spend accounting on the node: settled requests are summed per (caller, purpose, priority,
//! override?) in memory and sent to the ledger as one idempotent batch per interval.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::watch;

use crate::command::{Command, CommandResponse, NodeId, SpendReport, SpendTotals, SplitKey};
use crate::node::core::{LedgerCore, wall_clock_ms};

#[derive(Default)]
pub struct SpendAccumulator {
    rows: Mutex<HashMap<SplitKey, SpendTotals>>,
}

impl SpendAccumulator {
    pub fn record(&self, key: SplitKey, tokens: u64) {
        self.rows.lock().entry(key).or_default().add(SpendTotals {
            tokens,
            requests: 1,
        });
    }

    fn take(&self) -> Vec<(SplitKey, SpendTotals)> {
        let mut rows: Vec<_> = std::mem::take(&mut *self.rows.lock()).into_iter().collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }
}

/// Sends the accumulated spend every interval. A batch that fails is resent as is (same
/// sequence number, so the ledger counts it once) before anything newer.
pub(crate) struct SpendReporter {
    pub core: Arc<LedgerCore>,
    pub spend: Arc<SpendAccumulator>,
    pub node: NodeId,
    pub boot_id: u64,
    pub seq: u64,
    pub pending: Option<SpendReport>,
}

impl SpendReporter {
    pub async fn run(mut self, mut shutdown: watch::Receiver<bool>) {
        let interval = self.core.config.spend_flush_interval;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
            self.flush().await;
        }
        self.flush().await;
    }

    pub async fn flush(&mut self) {
        if self.pending.is_none() {
            let lines = self.spend.take();
            if lines.is_empty() {
                return;
            }
            self.seq += 1;
            self.pending = Some(SpendReport {
                node: self.node,
                boot_id: self.boot_id,
                seq: self.seq,
                minute: wall_clock_ms() / 60_000,
                lines,
            });
        }
        let Some(report) = self.pending.clone() else {
            return;
        };
        let outcome = match self.core.write(Command::ReportSpend(report)).await {
            Ok(CommandResponse::Spend { accepted: true }) => {
                self.pending = None;
                "committed"
            }
            Ok(CommandResponse::Spend { accepted: false }) => {
                self.pending = None;
                "duplicate"
            }
            Ok(_) => {
                self.pending = None;
                "unexpected"
            }
            Err(e) => {
                tracing::debug!(error = %e, "spend batch not committed, will resend");
                "failed"
            }
        };
        self.core
            .metrics
            .spend_batches
            .with_label_values(&[outcome])
            .inc();
    }
}
