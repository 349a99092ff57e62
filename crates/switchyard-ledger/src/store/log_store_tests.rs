#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The log store's contract with openraft: appends are acknowledged only once durable, what
//! was acknowledged survives a reopen, and truncate / purge / append keep the log in order.

use super::*;
use crate::store::open_database;
use openraft::storage::RaftLogStorageExt;
use openraft::testing::{blank_ent, log_id};
use openraft::{CommittedLeaderId, LeaderId};
use std::time::Duration;
use tempfile::TempDir;

fn store(dir: &TempDir) -> LogStore {
    let seconds = Histogram::with_opts(prometheus::HistogramOpts::new("s", "s")).unwrap();
    let entries = Histogram::with_opts(prometheus::HistogramOpts::new("e", "e")).unwrap();
    let db = open_database(dir.path()).unwrap();
    let stall = Arc::new(FlushStall::new(Arc::new(switchyard_core::SystemClock)));
    LogStore::new(db, Arc::new(LogFlushStats::new(seconds, entries)), stall)
}

fn blanks(term: u64, indexes: std::ops::RangeInclusive<u64>) -> Vec<Entry<TypeConfig>> {
    indexes
        .map(|i| blank_ent::<TypeConfig>(term, 1, i))
        .collect()
}

async fn ids(store: &mut LogStore, range: std::ops::RangeInclusive<u64>) -> Vec<LogId> {
    store
        .try_get_log_entries(range)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.log_id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_flush_holds_its_acknowledgement_but_not_the_readers() {
    let dir = TempDir::new().unwrap();
    let mut writer = store(&dir);
    writer.blocking_append(blanks(1, 1..=2)).await.unwrap();
    writer.stall.set(Duration::from_millis(600), None);
    let mut reader = writer.clone();
    let started = Instant::now();
    let append = tokio::spawn(async move {
        writer.blocking_append(blanks(1, 3..=4)).await.unwrap();
        started.elapsed()
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    // While the flush is stalled, readers answer at once, from the durable log.
    let read_started = Instant::now();
    let state = reader.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(log_id(1, 1, 2)));
    assert_eq!(ids(&mut reader, 1..=4).await.len(), 2);
    assert!(read_started.elapsed() < Duration::from_millis(300));
    assert!(!append.is_finished(), "acknowledged before its flush");
    // The acknowledgement (the `LogFlushed` callback) comes after the flush.
    let acknowledged_after = append.await.unwrap();
    assert!(acknowledged_after >= Duration::from_millis(600));
    let state = reader.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(log_id(1, 1, 4)));
    assert_eq!(reader.flush.entries.get_sample_count(), 2);
    assert!(reader.flush.seconds.get_sample_sum() >= 0.6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_was_acknowledged_survives_a_reopen() {
    let dir = TempDir::new().unwrap();
    let vote = Vote {
        leader_id: LeaderId::new(3, 2),
        committed: true,
    };
    {
        let mut store = store(&dir);
        store.save_vote(&vote).await.unwrap();
        store.blocking_append(blanks(3, 1..=5)).await.unwrap();
        store.save_committed(Some(log_id(3, 1, 4))).await.unwrap();
        // The committed marker and a purge are written with the next durable append.
        store.purge(log_id(3, 1, 2)).await.unwrap();
        store.blocking_append(blanks(3, 6..=6)).await.unwrap();
    }
    let mut store = store(&dir);
    assert_eq!(store.read_vote().await.unwrap(), Some(vote));
    assert_eq!(store.read_committed().await.unwrap(), Some(log_id(3, 1, 4)));
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(3, 1, 2)));
    assert_eq!(state.last_log_id, Some(log_id(3, 1, 6)));
    let expected: Vec<LogId> = (3..=6).map(|i| log_id(3, 1, i)).collect();
    assert_eq!(ids(&mut store, 0..=10).await, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_truncate_append_reads_in_order() {
    let dir = TempDir::new().unwrap();
    let mut store = store(&dir);
    store.blocking_append(blanks(1, 1..=5)).await.unwrap();
    assert_eq!(ids(&mut store, 1..=5).await.len(), 5);
    store.truncate(log_id(1, 1, 3)).await.unwrap();
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(log_id(1, 1, 2)));
    assert_eq!(
        ids(&mut store, 1..=5).await,
        vec![log_id(1, 1, 1), log_id(1, 1, 2)]
    );
    // A new leader's entries replace the truncated ones.
    let entries: Vec<Entry<TypeConfig>> =
        (3..=4).map(|i| blank_ent::<TypeConfig>(2, 2, i)).collect();
    store.blocking_append(entries).await.unwrap();
    let new_leader = |i| LogId::new(CommittedLeaderId::new(2, 2), i);
    assert_eq!(
        ids(&mut store, 1..=5).await,
        vec![
            log_id(1, 1, 1),
            log_id(1, 1, 2),
            new_leader(3),
            new_leader(4)
        ]
    );
    store.purge(log_id(1, 1, 2)).await.unwrap();
    let state = store.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 1, 2)));
    assert_eq!(state.last_log_id, Some(new_leader(4)));
    assert_eq!(
        ids(&mut store, 0..=5).await,
        vec![new_leader(3), new_leader(4)]
    );
}
