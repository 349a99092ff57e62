//! What every entry point of a node shares: the Raft handle, the applied state, and the
//! write / read / membership paths that forward to the leader when this node is not it.

use arc_swap::ArcSwap;
use openraft::ChangeMembers;
use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::sync::broadcast;

use super::reads::{ReadAnswer, ReadQuery, answer};
use crate::codec::{decode, encode};
use crate::command::{Command, CommandResponse, LedgerRequest, NodeId};
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

    /// Proposes on this node only (it must be the leader); stamps the entry with this
    /// leader's wall clock, which is the ledger's notion of time.
    pub async fn write_local(&self, command: Command) -> Result<CommandResponse, LedgerError> {
        let request = LedgerRequest {
            ts_ms: wall_clock_ms(),
            command,
        };
        match self.raft.client_write(request).await {
            Ok(response) => Ok(response.data),
            Err(e) if e.forward_to_leader::<RaftNode>().is_some() => Err(LedgerError::NoLeader),
            Err(e) => Err(LedgerError::Raft(e.to_string())),
        }
    }

    /// Writes through the leader, wherever it is; retries only while nothing was applied.
    pub async fn write(&self, command: Command) -> Result<CommandResponse, LedgerError> {
        let deadline = Instant::now() + self.config.write_timeout;
        loop {
            let attempt = match self.route() {
                Route::Local => ("local", self.write_local(command.clone()).await),
                Route::Leader(addr) => ("forward", self.forward_write(&addr, &command).await),
                Route::Unknown => ("none", Err(LedgerError::NoLeader)),
            };
            let (path, result) = attempt;
            let outcome = match &result {
                Ok(_) => "ok",
                Err(LedgerError::NoLeader) => "retry",
                Err(_) => "error",
            };
            self.metrics
                .forwarded_writes
                .with_label_values(&[path, outcome])
                .inc();
            match result {
                Err(e) if retryable(&e, command.is_idempotent()) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                other => return other,
            }
        }
    }

    async fn forward_write(
        &self,
        addr: &str,
        command: &Command,
    ) -> Result<CommandResponse, LedgerError> {
        let answer: Result<CommandResponse, WireError> =
            self.forward(addr, "/ledger/write", command).await?;
        answer.map_err(wire_to_ledger)
    }

    async fn forward<Req: Serialize, Resp: serde::de::DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        request: &Req,
    ) -> Result<Resp, LedgerError> {
        let body = encode(request)?;
        let bytes = self
            .transport
            .post(None, addr, path, body, self.config.rpc_timeout)
            .await
            .map_err(|e| LedgerError::Unreachable(e.to_string()))?;
        Ok(decode(&bytes)?)
    }

    /// Answers from this node's state after the leader confirmed it is still leader and
    /// this node applied everything committed before the read.
    pub async fn read_local(&self, query: &ReadQuery) -> Result<ReadAnswer, LedgerError> {
        match self.raft.ensure_linearizable().await {
            Ok(_) => Ok(answer(&self.state.read(), query)),
            Err(e) if e.forward_to_leader::<RaftNode>().is_some() => Err(LedgerError::NoLeader),
            Err(e) => Err(LedgerError::Raft(e.to_string())),
        }
    }

    pub async fn read(&self, query: ReadQuery) -> Result<ReadAnswer, LedgerError> {
        let deadline = Instant::now() + self.config.write_timeout;
        loop {
            let result = match self.route() {
                Route::Local => self.read_local(&query).await,
                Route::Leader(addr) => match self.forward(&addr, "/ledger/read", &query).await {
                    Ok(answer) => {
                        let answer: Result<ReadAnswer, WireError> = answer;
                        answer.map_err(wire_to_ledger)
                    }
                    Err(e) => Err(e),
                },
                Route::Unknown => Err(LedgerError::NoLeader),
            };
            match result {
                Err(e) if retryable(&e, true) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                other => return other,
            }
        }
    }

    pub async fn change_membership_local(
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
            let result = match self.route() {
                Route::Local => self.change_membership_local(&change).await,
                Route::Leader(addr) => {
                    match self.forward(&addr, "/ledger/membership", &change).await {
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
                Err(e) if retryable(&e, true) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(25)).await;
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

/// A failed attempt may be repeated when it certainly did not apply, or when applying the
/// command twice is harmless.
fn retryable(error: &LedgerError, idempotent: bool) -> bool {
    match error {
        LedgerError::NoLeader => true,
        LedgerError::Unreachable(_) => idempotent,
        _ => false,
    }
}

fn wire_to_ledger(error: WireError) -> LedgerError {
    if error.retry {
        LedgerError::NoLeader
    } else {
        LedgerError::Rejected(error.message)
    }
}
