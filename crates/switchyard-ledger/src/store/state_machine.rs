//! The state machine store: applies committed entries to [`LedgerState`], builds and installs
//! snapshots, and persists the latest snapshot in redb. The in-memory state is rebuilt on
//! start from that snapshot; openraft then re-applies the committed log after it.

use arc_swap::ArcSwap;
use openraft::storage::RaftStateMachine;
use openraft::{
    Entry, EntryPayload, OptionalSend, RaftSnapshotBuilder, Snapshot, SnapshotMeta,
    StoredMembership,
};
use parking_lot::RwLock;
use redb::Database;
use serde::{Deserialize, Serialize};
use std::io::Cursor;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::broadcast;

use super::db::{SNAPSHOT, StoreError, read_err, write_err};
use super::log_store::blocking;
use crate::codec::{decode, encode};
use crate::command::{Command, CommandResponse};
use crate::metrics::LedgerMetrics;
use crate::raft_types::{LogId, RaftNode, StorageError, TypeConfig};
use crate::state::{AffinityRecord, LedgerState};
use crate::view::LedgerView;

const CURRENT: &str = "current";

type Membership = StoredMembership<u64, RaftNode>;

#[derive(Clone, Serialize, Deserialize)]
struct StoredSnapshot {
    meta: SnapshotMeta<u64, RaftNode>,
    data: Vec<u8>,
}

/// Where applied changes are announced.
#[derive(Clone)]
pub struct StoreEvents {
    pub view: Arc<ArcSwap<LedgerView>>,
    pub affinity: broadcast::Sender<AffinityRecord>,
    pub metrics: Arc<LedgerMetrics>,
}

struct Applied {
    last: Option<LogId>,
    membership: Membership,
}

/// Cheap to clone: the snapshot builder is a clone.
#[derive(Clone)]
pub struct StateMachineStore {
    db: Arc<Database>,
    state: Arc<RwLock<LedgerState>>,
    applied: Arc<RwLock<Applied>>,
    current: Arc<RwLock<Option<StoredSnapshot>>>,
    events: StoreEvents,
}

impl StateMachineStore {
    /// Opens the store, restoring the last persisted snapshot if there is one.
    pub fn open(db: Arc<Database>, events: StoreEvents) -> Result<Self, StoreError> {
        let stored: Option<StoredSnapshot> = {
            let txn = db.begin_read()?;
            let table = txn.open_table(SNAPSHOT)?;
            match table.get(CURRENT)? {
                Some(value) => Some(decode(value.value())?),
                None => None,
            }
        };
        let (state, applied) = match &stored {
            Some(snapshot) => (
                decode::<LedgerState>(&snapshot.data)?,
                Applied {
                    last: snapshot.meta.last_log_id,
                    membership: snapshot.meta.last_membership.clone(),
                },
            ),
            None => (
                LedgerState::default(),
                Applied {
                    last: None,
                    membership: Membership::default(),
                },
            ),
        };
        events.view.store(Arc::new(LedgerView::from_state(&state)));
        Ok(Self {
            db,
            state: Arc::new(RwLock::new(state)),
            applied: Arc::new(RwLock::new(applied)),
            current: Arc::new(RwLock::new(stored)),
            events,
        })
    }

    /// The applied state, for reads (short read lock).
    pub fn state(&self) -> Arc<RwLock<LedgerState>> {
        self.state.clone()
    }

    fn publish(&self) {
        let view = LedgerView::from_state(&self.state.read());
        self.events.view.store(Arc::new(view));
    }

    async fn persist(&self, snapshot: &StoredSnapshot) -> Result<(), StoreError> {
        let bytes = encode(snapshot)?;
        let db = self.db.clone();
        blocking(move || {
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(SNAPSHOT)?;
                table.insert(CURRENT, bytes.as_slice())?;
            }
            txn.commit()?;
            Ok(())
        })
        .await
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachineStore {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let (data, last, membership) = {
            // Both locks together so the data matches the applied id exactly.
            let state = self.state.read();
            let applied = self.applied.read();
            (
                encode(&*state).map_err(read_err)?,
                applied.last,
                applied.membership.clone(),
            )
        };
        let snapshot_id = match last {
            Some(id) => format!("{}-{}-{}", id.leader_id, id.index, data.len()),
            None => format!("empty-{}", data.len()),
        };
        let meta = SnapshotMeta {
            last_log_id: last,
            last_membership: membership,
            snapshot_id,
        };
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data: data.clone(),
        };
        self.persist(&stored).await.map_err(write_err)?;
        *self.current.write() = Some(stored);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachineStore {
    type SnapshotBuilder = Self;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, Membership), StorageError> {
        let applied = self.applied.read();
        Ok((applied.last, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<CommandResponse>, StorageError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut responses = Vec::new();
        let mut affinity = Vec::new();
        {
            let mut state = self.state.write();
            let mut applied = self.applied.write();
            for entry in entries {
                let started = Instant::now();
                applied.last = Some(entry.log_id);
                let response = match entry.payload {
                    EntryPayload::Blank => CommandResponse::Done,
                    EntryPayload::Normal(request) => {
                        let response = state.apply_request(entry.log_id.index, &request);
                        if let Command::RecordAffinity { prefix_key, .. } = &request.command {
                            affinity.extend(state.affinity.by_prefix.get(prefix_key).cloned());
                        }
                        response
                    }
                    EntryPayload::Membership(membership) => {
                        applied.membership = Membership::new(Some(entry.log_id), membership);
                        CommandResponse::Done
                    }
                };
                if let Err(violation) = state.check_invariant() {
                    self.events.metrics.invariant_violations.inc();
                    tracing::error!(%violation, index = entry.log_id.index, "ledger invariant");
                }
                self.events
                    .metrics
                    .apply_seconds
                    .observe(started.elapsed().as_secs_f64());
                responses.push(response);
            }
        }
        self.publish();
        for record in affinity {
            // Nobody listening is fine: routers subscribe when they start.
            let _ = self.events.affinity.send(record);
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, RaftNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let data = snapshot.into_inner();
        let state: LedgerState = decode(&data).map_err(read_err)?;
        let stored = StoredSnapshot {
            meta: meta.clone(),
            data,
        };
        self.persist(&stored).await.map_err(write_err)?;
        {
            let mut current = self.state.write();
            let mut applied = self.applied.write();
            *current = state;
            applied.last = meta.last_log_id;
            applied.membership = meta.last_membership.clone();
        }
        *self.current.write() = Some(stored);
        self.publish();
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        Ok(self.current.read().clone().map(|stored| Snapshot {
            meta: stored.meta,
            snapshot: Box::new(Cursor::new(stored.data)),
        }))
    }
}
