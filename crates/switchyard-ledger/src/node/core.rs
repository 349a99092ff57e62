//! What every entry point of a node shares: the Raft handle, the applied state, and the
//! write / read / membership paths that forward to the leader when this node is not it.

use arc_swap::ArcSwap;
use openraft::ChangeMembers;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast;

use super::attempt::{
    RETRY_PAUSE, certainly_not_applied, lost_leadership, may_have_reached_the_handler, retryable,
    wire_to_ledger,
};
use super::ledger_time::LeaderClock;
use super::reads::{ReadAnswer, ReadQuery, answer};
use crate::codec::{decode, encode};
use crate::command::{Command, CommandResponse, LedgerRequest, NodeId, RequestId, WriteRequest};
use crate::config::LedgerConfig;
use crate::error::{LedgerError, WireError};
use crate::metrics::LedgerMetrics;
use crate::network::{FaultSwitch, HttpTransport};
use crate::raft_types::{LedgerRaft, RaftNode};
use crate::state::{AffinityRecord, LedgerState};
use crate::view::LedgerView;

/// Most voters a group may have; further replicas stay learners (crate docs).
pub const MAX_VOTERS: usize = 5;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MembershipChange {
    /// Start replicating to a node as a non-voting learner (waits until it caught up).
    AddLearner { id: NodeId, addr: String },
    /// Make a caught-up learner a voter.
    Promote { id: NodeId },
    /// Remove a voter or learner from the group.
    Remove { id: NodeId },
}

pub(crate) struct LedgerCore {
    pub id: NodeId,
    pub addr: String,
    pub raft: LedgerRaft,
    pub state: Arc<RwLock<LedgerState>>,
    pub view: Arc<ArcSwap<LedgerView>>,
    pub transport: Arc<HttpTransport>,
    pub faults: Arc<FaultSwitch>,
    pub metrics: Arc<LedgerMetrics>,
    pub config: LedgerConfig,
    pub affinity: broadcast::Sender<AffinityRecord>,
    pub request_ids: RequestIds,
    pub leader_clock: LeaderClock,
    /// Set by `LedgerNode::step_down`: a leader about to stop sends no housekeeping ticks.
    pub stepping_down: std::sync::atomic::AtomicBool,
}

/// Hands out the ids of this process's writes: `boot` keeps them fresh across restarts.
pub(crate) struct RequestIds {
    origin: u64,
    boot: u64,
    next: AtomicU64,
}

impl RequestIds {
    pub fn new(origin: u64, boot: u64) -> Self {
        Self {
            origin,
            boot,
            next: AtomicU64::new(1),
        }
    }

    pub fn next(&self) -> RequestId {
        RequestId {
            origin: self.origin,
            boot: self.boot,
            seq: self.next.fetch_add(1, Ordering::Relaxed),
        }
    }
}

pub fn wall_clock_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// What the local Raft says about where a request must go.
enum Route {
    Local,
    Leader(String),
    Unknown,
}

impl LedgerCore {
    fn route(&self) -> Route {
        let metrics = self.raft.metrics().borrow().clone();
        match metrics.current_leader {
            Some(leader) if leader == self.id => Route::Local,
            Some(leader) => match metrics.membership_config.membership().get_node(&leader) {
                Some(node) => Route::Leader(node.addr.clone()),
                None => Route::Unknown,
            },
            None => Route::Unknown,
        }
    }

    /// Ledger time for an entry proposed now ([`LeaderClock`]: the wall clock read once per
    /// term, then the monotonic clock).
    fn stamp(&self) -> u64 {
        let term = self.raft.metrics().borrow().current_term;
        let applied = self.view.load().now_ms;
        self.leader_clock.stamp(
            term,
            applied,
            self.config.wall_clock.now_ms(),
            Instant::now(),
        )
    }

    /// Ledger time as this node would stamp it now (for deciding that the log is quiet).
    pub fn ledger_now_ms(&self) -> u64 {
        let term = self.raft.metrics().borrow().current_term;
        let applied = self.view.load().now_ms;
        self.leader_clock.peek(
            term,
            applied,
            self.config.wall_clock.now_ms(),
            Instant::now(),
        )
    }

    /// Proposes on this node only (it must be the leader); stamps the entry with ledger time
    /// as this leader keeps it. A leader that cannot commit within `within` (cut off from
    /// its majority) answers `OutcomeUnknown`: the entry may still commit later, or be
    /// dropped by the next leader.
    pub async fn write_local(
        &self,
        request: WriteRequest,
        within: Duration,
    ) -> Result<CommandResponse, LedgerError> {
        if self.stepping_down.load(std::sync::atomic::Ordering::SeqCst) {
            // A leader handing over takes no new entries: each replicated entry would refresh
            // the followers' lease and hold off the election of its successor. `NoLeader`
            // (certainly not applied) sends writers round again, to the successor.
            return Err(LedgerError::NoLeader);
        }
        let entry = LedgerRequest {
            ts_ms: self.stamp(),
            request_id: request.id,
            command: request.command,
        };
        let proposed = Instant::now();
        match tokio::time::timeout(within, self.raft.client_write(entry)).await {
            Ok(Ok(response)) => {
                self.metrics
                    .commit_seconds
                    .observe(proposed.elapsed().as_secs_f64());
                Ok(response.data)
            }
            Ok(Err(e)) if e.forward_to_leader::<RaftNode>().is_some() => Err(LedgerError::NoLeader),
            Ok(Err(e)) => Err(LedgerError::Raft(e.to_string())),
            Err(_) => Err(LedgerError::OutcomeUnknown(format!(
                "not committed within {within:?}"
            ))),
        }
    }

    /// Writes through the leader, wherever it is. Every attempt carries the same request
    /// id, so a retry after an ambiguous failure is answered with the first attempt's outcome
    /// instead of applying twice; the whole call is bounded by the write timeout.
    pub async fn write(&self, command: Command) -> Result<CommandResponse, LedgerError> {
        let request = WriteRequest {
            id: Some(self.request_ids.next()),
            command,
        };
        let deadline = Instant::now() + self.config.write_timeout;
        // Whether some attempt may have reached a leader's log: then giving up means the
        // outcome is unknown, not that nothing happened.
        let mut maybe_applied = false;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let (path, result) = match self.route() {
                Route::Local => ("local", self.write_local(request.clone(), remaining).await),
                Route::Leader(addr) => (
                    "forward",
                    self.forward_write(&addr, &request, remaining).await,
                ),
                Route::Unknown => ("none", Err(LedgerError::NoLeader)),
            };
            let outcome = match &result {
                Ok(_) => "ok",
                Err(e) if retryable(e) => "retry",
                Err(_) => "error",
            };
            self.metrics
                .forwarded_writes
                .with_label_values(&[path, outcome])
                .inc();
            let error = match result {
                Err(e) if retryable(&e) => e,
                other => return other,
            };
            maybe_applied |= !certainly_not_applied(&error);
            if Instant::now() + RETRY_PAUSE >= deadline {
                return Err(match error {
                    LedgerError::OutcomeUnknown(_) => error,
                    _ if maybe_applied => LedgerError::OutcomeUnknown(error.to_string()),
                    _ => error,
                });
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    async fn forward_write(
        &self,
        addr: &str,
        request: &WriteRequest,
        within: Duration,
    ) -> Result<CommandResponse, LedgerError> {
        let answer: Result<CommandResponse, WireError> =
            self.forward(addr, "/ledger/write", request, within).await?;
        answer.map_err(wire_to_ledger)
    }

    async fn forward<Req: Serialize, Resp: serde::de::DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        request: &Req,
        within: Duration,
    ) -> Result<Resp, LedgerError> {
        let body = encode(request)?;
        let timeout = self.config.rpc_timeout.min(within);
        let bytes = self
            .transport
            .post(None, addr, path, body, timeout)
            .await
            .map_err(|e| {
                if may_have_reached_the_handler(&e) {
                    LedgerError::Unreachable(e.to_string())
                } else {
                    LedgerError::NoLeader
                }
            })?;
        Ok(decode(&bytes)?)
    }

    /// Answers from this node's state after the leader confirmed, within `within`, that it
    /// is still leader and this node applied everything committed before the read. A leader
    /// that lost its quorum is no leader for reads: `NoLeader`, retried, then 503.
    pub async fn read_local(
        &self,
        query: &ReadQuery,
        within: Duration,
    ) -> Result<ReadAnswer, LedgerError> {
        match tokio::time::timeout(within, self.raft.ensure_linearizable()).await {
            Ok(Ok(_)) => Ok(answer(&self.state.read(), query)),
            Ok(Err(e)) if lost_leadership(&e) => Err(LedgerError::NoLeader),
            Ok(Err(e)) => Err(LedgerError::Raft(e.to_string())),
            Err(_) => Err(LedgerError::NoLeader),
        }
    }

    pub async fn read(&self, query: ReadQuery) -> Result<ReadAnswer, LedgerError> {
        let deadline = Instant::now() + self.config.write_timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let result = match self.route() {
                Route::Local => self.read_local(&query, remaining).await,
                Route::Leader(addr) => {
                    match self.forward(&addr, "/ledger/read", &query, remaining).await {
                        Ok(answer) => {
                            let answer: Result<ReadAnswer, WireError> = answer;
                            answer.map_err(wire_to_ledger)
                        }
                        Err(e) => Err(e),
                    }
                }
                Route::Unknown => Err(LedgerError::NoLeader),
            };
            match result {
                // A read changes nothing: any transient failure may be retried.
                Err(e) if retryable(&e) && Instant::now() + RETRY_PAUSE < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                Err(LedgerError::OutcomeUnknown(message)) => {
                    return Err(LedgerError::Unreachable(message));
                }
                other => return other,
            }
        }
    }

    /// Changes membership on this node (it must be the leader); a leader that cannot commit
    /// the change within `within` answers `OutcomeUnknown`.
    pub async fn change_membership_local(
        &self,
        change: &MembershipChange,
        within: Duration,
    ) -> Result<(), LedgerError> {
        tokio::time::timeout(within, self.change_membership_unbounded(change))
            .await
            .unwrap_or_else(|_| {
                Err(LedgerError::OutcomeUnknown(format!(
                    "membership change not committed within {within:?}"
                )))
            })
    }

    async fn change_membership_unbounded(
        &self,
        change: &MembershipChange,
    ) -> Result<(), LedgerError> {
        let membership = self.raft.metrics().borrow().membership_config.clone();
        let voters: BTreeSet<NodeId> = membership.membership().voter_ids().collect();
        let result = match change {
            MembershipChange::AddLearner { id, addr } => self
                .raft
                .add_learner(*id, RaftNode::new(addr), true)
                .await
                .map(|_| ()),
            MembershipChange::Promote { id } => {
                if !voters.contains(id) && voters.len() >= MAX_VOTERS {
                    return Err(LedgerError::Rejected(format!(
                        "the group already has {MAX_VOTERS} voters; keep node {id} a learner"
                    )));
                }
                self.raft
                    .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([*id])), false)
                    .await
                    .map(|_| ())
            }
            MembershipChange::Remove { id } => {
                let change = if voters.contains(id) {
                    ChangeMembers::RemoveVoters(BTreeSet::from([*id]))
                } else {
                    ChangeMembers::RemoveNodes(BTreeSet::from([*id]))
                };
                self.raft.change_membership(change, false).await.map(|_| ())
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) if e.forward_to_leader::<RaftNode>().is_some() => Err(LedgerError::NoLeader),
            Err(e) => Err(LedgerError::Rejected(e.to_string())),
        }
    }

    pub async fn change_membership(&self, change: MembershipChange) -> Result<(), LedgerError> {
        let deadline = Instant::now() + self.config.write_timeout;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let result = match self.route() {
                Route::Local => self.change_membership_local(&change, remaining).await,
                Route::Leader(addr) => {
                    match self
                        .forward(&addr, "/ledger/membership", &change, remaining)
                        .await
                    {
                        Ok(answer) => {
                            let answer: Result<(), WireError> = answer;
                            answer.map_err(wire_to_ledger)
                        }
                        Err(e) => Err(e),
                    }
                }
                Route::Unknown => Err(LedgerError::NoLeader),
            };
            match result {
                // Membership changes are idempotent (adding a member twice is a no-op).
                Err(e) if retryable(&e) && Instant::now() + RETRY_PAUSE < deadline => {
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                other => return other,
            }
        }
    }

    pub async fn initialize(&self, members: BTreeMap<NodeId, String>) -> Result<(), LedgerError> {
        let nodes: BTreeMap<NodeId, RaftNode> = members
            .into_iter()
            .map(|(id, addr)| (id, RaftNode::new(addr)))
            .collect();
        self.raft
            .initialize(nodes)
            .await
            .map_err(|e| LedgerError::Raft(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_unique_within_a_process_and_across_boots() {
        let ids = RequestIds::new(3, 100);
        let (a, b) = (ids.next(), ids.next());
        assert_ne!(a, b);
        assert_ne!(
            RequestIds::new(3, 101).next(),
            RequestIds::new(3, 100).next()
        );
    }
}
