//! After a restart: reports every lease the previous process left open in the journal at its
//! synced ceiling, until the ledger has it, then closes the entry.

use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

use super::{Ceilings, Record, SpendJournal};
use crate::command::Command;
use crate::node::core::LedgerCore;

const RETRY_AFTER: Duration = Duration::from_millis(500);

pub(crate) async fn run(
    core: Arc<LedgerCore>,
    journal: Arc<SpendJournal>,
    recovered: Ceilings,
    mut shutdown: watch::Receiver<bool>,
) {
    for ((pool, epoch), ceiling) in recovered {
        let command = Command::ReclaimLease {
            node: core.id,
            pool: pool.clone(),
            epoch,
            spent_at_most: ceiling,
        };
        loop {
            match core.write(command.clone()).await {
                Ok(_) => {
                    core.metrics.journal_reclaims.inc();
                    tracing::info!(
                        ?pool,
                        epoch,
                        ceiling,
                        "lease of the previous process reported"
                    );
                    break;
                }
                Err(e) => {
                    tracing::debug!(error = %e, ?pool, epoch, "lease report not committed; retrying");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY_AFTER) => {}
                _ = shutdown.changed() => return,
            }
        }
        // Not closing it only means one more (harmless) report after another restart.
        let _ = journal.append(vec![Record::Closed { pool, epoch }]).await;
    }
}
