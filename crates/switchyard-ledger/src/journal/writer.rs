//! The journal writer: an owned task that raises each lease's synced ceiling a step ahead of
//! its spend, one sync for every lease due, and closes the entries of epochs a lease left.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

use super::{Record, SpendJournal};
use crate::lease::LeaseTable;
use crate::metrics::LedgerMetrics;

/// A look at every lease even without a kick (closing left epochs, a failed sync retried).
const LOOK_INTERVAL: Duration = Duration::from_millis(200);

pub(crate) struct JournalWriter {
    pub journal: Arc<SpendJournal>,
    pub table: Arc<LeaseTable>,
    pub metrics: Arc<LedgerMetrics>,
}

impl JournalWriter {
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = self.table.journal_kicked().notified() => {}
                _ = tokio::time::sleep(LOOK_INTERVAL) => {}
                _ = shutdown.changed() => break,
            }
            if *shutdown.borrow() {
                break;
            }
            self.pass().await;
        }
    }

    /// Syncs every ceiling due in one append, then lets waiting reservations look again.
    pub async fn pass(&self) {
        let set = self.table.set();
        let mut records = Vec::new();
        let mut raised = Vec::new();
        for lease in set.all() {
            for epoch in lease.take_closed_epochs() {
                records.push(Record::Closed {
                    pool: lease.pool.clone(),
                    epoch,
                });
            }
            if let Some((epoch, ceiling)) = lease.journal_due() {
                records.push(Record::Ceiling {
                    pool: lease.pool.clone(),
                    epoch,
                    ceiling,
                });
                raised.push((lease.clone(), epoch, ceiling));
            }
        }
        drop(set);
        if records.is_empty() {
            return;
        }
        let started = Instant::now();
        match self.journal.append(records).await {
            Ok(()) => {
                let took = started.elapsed();
                self.metrics
                    .journal_sync_seconds
                    .observe(took.as_secs_f64());
                self.table
                    .journal_latency()
                    .observe(took, self.table.clock().now());
                for (lease, epoch, ceiling) in raised {
                    lease.journal_synced(epoch, ceiling);
                }
            }
            Err(e) => {
                self.metrics.journal_failures.inc();
                tracing::warn!(error = %e, "spend journal sync failed; reservations past the ceiling wait");
            }
        }
        self.table.note_answer();
    }
}
