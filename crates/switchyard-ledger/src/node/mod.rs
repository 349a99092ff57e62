//! A running ledger node: storage, Raft, the HTTP server on the raft address, and the owned
//! background tasks (lease keeper, spend reporter, housekeeping). The Rust API here is what
//! the gateway's admin endpoints and `switchyard ctl` call.

mod attempt;
pub(crate) mod core;
mod housekeeping;
mod lease_keeper;
mod ledger_time;
mod operator;
pub mod reads;

pub use self::core::{MAX_VOTERS, MembershipChange, wall_clock_ms};
pub(crate) use attempt::may_have_reached_the_handler;

use arc_swap::ArcSwap;
use openraft::{Config, ServerState, SnapshotPolicy};
use prometheus::Registry;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::Clock;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

use self::core::{LedgerCore, RequestIds};
use crate::command::NodeId;
use crate::config::{LedgerConfig, LedgerWallClock};
use crate::error::LedgerError;
use crate::journal::writer::JournalWriter;
use crate::journal::{SpendJournal, reclaim};
use crate::lease::LeaseTable;
use crate::metrics::LedgerMetrics;
use crate::network::tls_listener::TlsListener;
use crate::network::{FaultSwitch, HttpTransport, NetworkFactory, SNAPSHOT_CHUNK_BYTES, server};
use crate::quota::LedgerQuota;
use crate::raft_types::LedgerRaft;
use crate::spend::{SpendAccumulator, SpendReporter};
use crate::store::{
    FlushStall, LogFlushStats, LogStore, StateMachineStore, StoreEvents, identity, open_database,
};
use crate::view::LedgerView;
use lease_keeper::LeaseKeeper;

/// What `status` reports (local view, not linearizable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterStatus {
    pub node_id: NodeId,
    pub role: &'static str,
    pub leader: Option<NodeId>,
    pub term: u64,
    pub last_applied: u64,
    pub voters: Vec<NodeId>,
    /// Every member (voters and learners) with its raft address.
    pub members: BTreeMap<NodeId, String>,
}

pub struct LedgerNode {
    core: Arc<LedgerCore>,
    quota: Arc<LedgerQuota>,
    shutdown: watch::Sender<bool>,
    /// Lease keeper and spend reporter: they write on the way out, so they stop first.
    writers: Vec<JoinHandle<()>>,
    /// HTTP server and housekeeping.
    services: Vec<JoinHandle<()>>,
    log_flush_stall: Arc<FlushStall>,
    journal_sync_stall: Arc<FlushStall>,
}

impl LedgerNode {
    /// Opens the data dir, binds `config.raft_addr`, starts Raft and the background tasks.
    /// The node joins nothing by itself: call `initialize*` on one node of a new group, or
    /// `add_learner` on the existing group's leader (any node forwards).
    pub async fn start(
        config: LedgerConfig,
        registry: &Registry,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, LedgerError> {
        if config.cluster_secret.is_empty() {
            return Err(LedgerError::Config("cluster_secret must be set".into()));
        }
        let metrics = Arc::new(LedgerMetrics::register(registry)?);
        let db = open_database(&config.data_dir)?;
        identity::bind(&db, config.node_id, &config.cluster_id)?;
        // Opened after the database, whose lock keeps a second process off this data dir.
        let journal_sync_stall = Arc::new(FlushStall::new(clock.clone()));
        let (journal, recovered) =
            SpendJournal::open(&config.data_dir, journal_sync_stall.clone())?;
        let journal = Arc::new(journal);
        let log_flush = Arc::new(LogFlushStats::new(
            metrics.log_flush_seconds.clone(),
            metrics.log_flush_entries.clone(),
        ));
        let log_flush_stall = Arc::new(FlushStall::new(clock.clone()));
        let log_store = LogStore::new(db.clone(), log_flush, log_flush_stall.clone());
        let committed = log_store.committed_index();
        let view = Arc::new(ArcSwap::from_pointee(LedgerView::default()));
        let (affinity, _) = broadcast::channel(4096);
        let events = StoreEvents {
            view: view.clone(),
            affinity: affinity.clone(),
            metrics: metrics.clone(),
        };
        let state_machine = StateMachineStore::open(db, events)?;
        let state = state_machine.state();

        let listener = tokio::net::TcpListener::bind(&config.raft_addr)
            .await
            .map_err(|source| LedgerError::Bind {
                addr: config.raft_addr.clone(),
                source,
            })?;
        let bound = listener.local_addr().map_err(|source| LedgerError::Bind {
            addr: config.raft_addr.clone(),
            source,
        })?;
        let addr = config
            .advertise_addr
            .clone()
            .unwrap_or_else(|| bound.to_string());

        let faults = Arc::new(FaultSwitch::default());
        let transport = Arc::new(HttpTransport::new(
            config.node_id,
            Arc::from(config.cluster_secret.expose()),
            faults.clone(),
            config.rpc_timeout,
            config.tls.as_ref(),
        ));
        let raft_config = Config {
            cluster_name: config.cluster_id.clone(),
            heartbeat_interval: config.raft.heartbeat_interval_ms,
            election_timeout_min: config.raft.election_timeout_min_ms,
            election_timeout_max: config.raft.election_timeout_max_ms,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(config.raft.snapshot_after_logs),
            max_in_snapshot_log_to_keep: config.raft.logs_kept_after_snapshot,
            snapshot_max_chunk_size: SNAPSHOT_CHUNK_BYTES,
            install_snapshot_timeout: config.raft.install_snapshot_timeout_ms,
            ..Default::default()
        }
        .validate()
        .map_err(|e| LedgerError::Config(e.to_string()))?;
        let raft = LedgerRaft::new(
            config.node_id,
            Arc::new(raft_config),
            NetworkFactory::new(transport.clone()),
            log_store,
            state_machine,
        )
        .await
        .map_err(|e| LedgerError::Raft(e.to_string()))?;

        let core = Arc::new(LedgerCore {
            id: config.node_id,
            addr,
            raft,
            state,
            view: view.clone(),
            transport,
            faults,
            metrics: metrics.clone(),
            config: config.clone(),
            affinity,
            request_ids: RequestIds::new(config.node_id, wall_clock_ms()),
            leader_clock: Default::default(),
            stepping_down: Default::default(),
        });
        let (shutdown, shutdown_rx) = watch::channel(false);

        let mut server_shutdown = shutdown_rx.clone();
        let app = server::router(core.clone());
        let stop = async move {
            let _ = server_shutdown.changed().await;
        };
        let server_task = match &config.tls {
            None => tokio::spawn(async move {
                if let Err(e) = axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
                {
                    tracing::error!(error = %e, "ledger http server stopped");
                }
            }),
            Some(tls) => {
                let refused = metrics.peer_tls_refusals.clone();
                let listener = TlsListener::new(listener, Arc::clone(&tls.server), move |_| {
                    refused.inc();
                })
                .map_err(|source| LedgerError::Bind {
                    addr: config.raft_addr.clone(),
                    source,
                })?;
                tokio::spawn(async move {
                    if let Err(e) = axum::serve(listener, app)
                        .with_graceful_shutdown(stop)
                        .await
                    {
                        tracing::error!(error = %e, "ledger https server stopped");
                    }
                })
            }
        };
        let housekeeping_task = tokio::spawn(housekeeping::run(
            core.clone(),
            committed,
            shutdown_rx.clone(),
        ));

        let table = Arc::new(LeaseTable::new(clock, view));
        let spend = Arc::new(SpendAccumulator::default());
        let keeper = LeaseKeeper {
            core: core.clone(),
            table: table.clone(),
            config: config.lease.clone(),
            journal: journal.clone(),
        };
        let keeper_task = tokio::spawn(keeper.run(shutdown_rx.clone()));
        let journal_writer = JournalWriter {
            journal: journal.clone(),
            table: table.clone(),
            metrics: metrics.clone(),
        };
        let journal_task = tokio::spawn(journal_writer.run(shutdown_rx.clone()));
        if !recovered.is_empty() {
            tracing::info!(
                leases = recovered.len(),
                "spend journal: reporting the leases of the previous process"
            );
        }
        let reclaim_task = tokio::spawn(reclaim::run(
            core.clone(),
            journal,
            recovered,
            shutdown_rx.clone(),
        ));
        let reporter = SpendReporter {
            core: core.clone(),
            spend: spend.clone(),
            node: config.node_id,
            boot_id: wall_clock_ms(),
            seq: 0,
            pending: None,
        };
        let reporter_task = tokio::spawn(reporter.run(shutdown_rx));
        let quota = Arc::new(LedgerQuota::new(
            table,
            spend,
            metrics,
            config.lease.renewal_wait.max(config.raft.failover_bound()),
        ));
        Ok(Self {
            core,
            quota,
            shutdown,
            writers: vec![keeper_task, reporter_task, journal_task, reclaim_task],
            services: vec![server_task, housekeeping_task],
            log_flush_stall,
            journal_sync_stall,
        })
    }

    pub(crate) fn core(&self) -> &LedgerCore {
        &self.core
    }

    pub fn id(&self) -> NodeId {
        self.core.id
    }

    /// The address other nodes reach this one at (the bound one unless advertised).
    pub fn raft_addr(&self) -> &str {
        &self.core.addr
    }

    /// The hot-path quota ledger to hand to admission.
    pub fn quota(&self) -> Arc<LedgerQuota> {
        self.quota.clone()
    }

    /// The wall clock this node stamps entries with while it leads (the chaos suite skews it).
    pub fn wall_clock(&self) -> &LedgerWallClock {
        &self.core.config.wall_clock
    }

    /// Test-only: the switch that makes this node's Raft log appends sleep before their
    /// durable commit, standing in for a disk whose fsync stalls (off unless set).
    pub fn test_log_flush_stall(&self) -> &FlushStall {
        &self.log_flush_stall
    }

    /// Test-only: the same for this node's spend-journal syncs (the lease ceilings).
    pub fn test_journal_sync_stall(&self) -> &FlushStall {
        &self.journal_sync_stall
    }

    /// The partition injector of this node.
    pub fn faults(&self) -> Arc<FaultSwitch> {
        self.core.faults.clone()
    }

    /// The latest applied summary (budgets, committed tokens, active overrides).
    pub fn view(&self) -> Arc<LedgerView> {
        self.core.view.load_full()
    }

    /// The openraft handle, for callers that need more than this API.
    pub fn raft(&self) -> &LedgerRaft {
        &self.core.raft
    }

    // ---- cluster ----

    /// Bootstraps a new group with this node as its only voter (e.g. `switchyard demo`).
    pub async fn initialize_single(&self) -> Result<(), LedgerError> {
        self.core
            .initialize(BTreeMap::from([(self.core.id, self.core.addr.clone())]))
            .await
    }

    /// Bootstraps a new group with the given voters (call on one of them, once).
    pub async fn initialize(&self, members: BTreeMap<NodeId, String>) -> Result<(), LedgerError> {
        self.core.initialize(members).await
    }

    pub async fn add_learner(
        &self,
        id: NodeId,
        addr: impl Into<String>,
    ) -> Result<(), LedgerError> {
        self.core
            .change_membership(MembershipChange::AddLearner {
                id,
                addr: addr.into(),
            })
            .await
    }

    pub async fn promote(&self, id: NodeId) -> Result<(), LedgerError> {
        self.core
            .change_membership(MembershipChange::Promote { id })
            .await
    }

    pub async fn remove(&self, id: NodeId) -> Result<(), LedgerError> {
        self.core
            .change_membership(MembershipChange::Remove { id })
            .await
    }

    pub fn status(&self) -> ClusterStatus {
        let m = self.core.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        let role = match m.state {
            ServerState::Leader => "leader",
            ServerState::Candidate => "candidate",
            ServerState::Shutdown => "shutdown",
            _ if !membership.voter_ids().any(|id| id == self.core.id) => "learner",
            _ => "follower",
        };
        ClusterStatus {
            node_id: self.core.id,
            role,
            leader: m.current_leader,
            term: m.current_term,
            last_applied: m.last_applied.map_or(0, |id| id.index),
            voters: membership.voter_ids().collect(),
            members: membership
                .nodes()
                .map(|(id, node)| (*id, node.addr.clone()))
                .collect(),
        }
    }

    /// Before a leader stops: no more heartbeats or housekeeping ticks, and no standing for
    /// election again, so the followers' lease lapses and they elect a successor while this
    /// node still votes (openraft 0.9 has no leadership transfer). New writes are refused
    /// meanwhile as `NoLeader` (writers retry and reach the successor): replicating them would
    /// keep the followers' lease fresh and no successor would ever be elected.
    pub fn step_down(&self) {
        self.core
            .stepping_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let runtime = self.core.raft.runtime_config();
        runtime.elect(false);
        runtime.heartbeat(false);
    }

    /// Undoes [`step_down`](Self::step_down) when no successor came in time.
    pub fn resume_leading(&self) {
        self.core
            .stepping_down
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let runtime = self.core.raft.runtime_config();
        runtime.heartbeat(true);
        runtime.elect(true);
    }

    /// Waits until some node is leader as seen from here (tests, startup scripts).
    pub async fn wait_for_leader(&self, timeout: Duration) -> Result<NodeId, LedgerError> {
        let mut metrics = self.core.raft.metrics();
        let wait = async {
            loop {
                if let Some(leader) = metrics.borrow().current_leader {
                    return Ok(leader);
                }
                if metrics.changed().await.is_err() {
                    return Err(LedgerError::NoLeader);
                }
            }
        };
        tokio::time::timeout(timeout, wait)
            .await
            .map_err(|_| LedgerError::NoLeader)?
    }

    // ---- lifecycle ----

    /// Graceful stop: releases leases and flushes spend while Raft still runs, then stops
    /// Raft and the server.
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        for task in self.writers.drain(..) {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        self.stop_services().await;
    }

    /// Stops without releasing leases or flushing spend, as a crash would (tests).
    pub async fn crash(mut self) {
        for task in self.writers.drain(..) {
            task.abort();
        }
        let _ = self.shutdown.send(true);
        self.stop_services().await;
    }

    async fn stop_services(&mut self) {
        if let Err(e) = self.core.raft.shutdown().await {
            tracing::warn!(error = %e, "raft shutdown");
        }
        for task in self.services.drain(..) {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), task)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for LedgerNode {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        for task in self.writers.iter().chain(&self.services) {
            task.abort();
        }
    }
}
