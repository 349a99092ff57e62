//! Affinity events cross replicas through the ledger: the local policy's migrations are
//! appended to the replicated log, and every applied record (ours included, applied
//! idempotently) is fed back to the routing policy.

use std::sync::Arc;
use switchyard_ledger::{AffinityRecord, LedgerNode};
use switchyard_router::{AffinityEvent, AffinityReason, AffinitySink, RoutingPolicy};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

/// Longest prefix text carried in a replicated affinity record.
const MAX_PREFIX_BYTES: usize = 4096;
const QUEUE: usize = 1024;

/// Hands the policy's events to the forwarder without blocking the request path; when the
/// queue is full the event is dropped (the local policy already applied it).
pub struct LedgerAffinitySink {
    tx: mpsc::Sender<AffinityEvent>,
    dropped: prometheus::IntCounter,
}

impl AffinitySink for LedgerAffinitySink {
    fn publish(&self, event: AffinityEvent) {
        if self.tx.try_send(event).is_err() {
            self.dropped.inc();
        }
    }
}

pub fn sink(
    registry: &prometheus::Registry,
) -> prometheus::Result<(Arc<LedgerAffinitySink>, mpsc::Receiver<AffinityEvent>)> {
    let dropped = prometheus::IntCounter::new(
        "switchyard_affinity_events_dropped_total",
        "Affinity events not replicated because the forwarding queue was full.",
    )?;
    registry.register(Box::new(dropped.clone()))?;
    let (tx, rx) = mpsc::channel(QUEUE);
    Ok((Arc::new(LedgerAffinitySink { tx, dropped }), rx))
}

fn reason_text(reason: AffinityReason) -> &'static str {
    match reason {
        AffinityReason::Migration => "migration",
        AffinityReason::LoadMove => "load_move",
    }
}

fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Appends local events to the ledger.
pub fn spawn_forwarder(
    node: Arc<LedgerNode>,
    mut events: mpsc::Receiver<AffinityEvent>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            let result = node
                .record_affinity(
                    event.prefix_key,
                    cut(&event.prefix, MAX_PREFIX_BYTES),
                    &event.worker,
                    &event.displaced,
                    reason_text(event.reason),
                )
                .await;
            if let Err(error) = result {
                tracing::warn!(%error, "affinity event not replicated");
            }
        }
    })
}

fn to_event(record: &AffinityRecord) -> AffinityEvent {
    AffinityEvent {
        prefix_key: record.prefix_key,
        prefix: Arc::from(record.prefix.as_str()),
        worker: record.worker.clone(),
        displaced: record.displaced.clone(),
        reason: if record.reason == "load_move" {
            AffinityReason::LoadMove
        } else {
            AffinityReason::Migration
        },
        at_unix_ms: record.at_ms,
    }
}

/// Applies `records` that point at `worker` to the policy; returns how many. A policy ignores
/// a record naming a worker it does not know, and a replica that starts (or restarts) receives
/// the group's records before its workers are registered, as it does a record naming a worker
/// another replica added first: so each worker, once added here, catches up on the records
/// that name it. The ledger keeps only each key's latest record, so this restores what the
/// group decided last.
pub fn apply_records_naming<'r>(
    records: impl IntoIterator<Item = &'r AffinityRecord>,
    worker: &str,
    policy: &dyn RoutingPolicy,
) -> usize {
    let mut applied = 0;
    for record in records.into_iter().filter(|record| record.worker == worker) {
        policy.apply_affinity(&to_event(record));
        applied += 1;
    }
    applied
}

/// Applies every replicated record to the policy: first those already applied before this
/// process subscribed, then each new one.
pub fn spawn_applier(node: Arc<LedgerNode>, policy: Arc<dyn RoutingPolicy>) -> JoinHandle<()> {
    let mut records = node.subscribe_affinity();
    let existing = node.affinity_records();
    tokio::spawn(async move {
        for record in &existing {
            policy.apply_affinity(&to_event(record));
        }
        loop {
            match records.recv().await {
                Ok(record) => {
                    policy.apply_affinity(&to_event(&record));
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "affinity records skipped; catching up from state");
                    for record in node.affinity_records() {
                        policy.apply_affinity(&to_event(&record));
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchyard_core::WorkerId;
    use switchyard_router::{PolicyContext, RoutingConfig, build_policy};

    fn record(prefix_key: u64, worker: &str) -> AffinityRecord {
        AffinityRecord {
            prefix_key,
            prefix: String::new(),
            worker: worker.to_string(),
            displaced: Vec::new(),
            reason: "load_move".to_string(),
            at_ms: 1,
            log_index: prefix_key,
        }
    }

    fn cache_aware() -> Arc<dyn RoutingPolicy> {
        let config = RoutingConfig {
            policy: "cache_aware".to_string(),
            ..RoutingConfig::default()
        };
        build_policy(&config, PolicyContext::default()).expect("policy")
    }

    #[test]
    fn records_received_before_their_worker_apply_once_it_is_added() {
        let policy = cache_aware();
        policy.worker_added(WorkerId(1), "sim-0");
        let records = [record(7, "sim-1"), record(8, "sim-1"), record(9, "sim-0")];
        // What a replica starting up sees: the group's records before sim-1 is registered.
        for record in &records {
            policy.apply_affinity(&to_event(record));
        }
        let before = policy.stats();
        assert_eq!(before.affinity_events_ignored, 2);
        assert_eq!(before.placement_overrides, 1);

        policy.worker_added(WorkerId(2), "sim-1");
        assert_eq!(apply_records_naming(&records, "sim-1", &*policy), 2);
        let after = policy.stats();
        assert_eq!(after.placement_overrides, 3);
        assert_eq!(after.affinity_events_applied, 3);
        // Records naming other workers are left alone.
        assert_eq!(apply_records_naming(&records, "sim-2", &*policy), 0);
        assert_eq!(policy.stats().affinity_events_applied, 3);
    }
}
