//! A client for the ledger's node-to-node HTTP surface, for tools outside a node
//! (`switchyard ctl`, the kill -9 test): it finds the leader by trying the known nodes.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::codec::{decode, encode};
use crate::command::{Command, CommandResponse, WriteRequest};
use crate::error::{LedgerError, WireError};
use crate::network::{FaultSwitch, HttpTransport, PeerTls, TransportError};
use crate::node::MembershipChange;
use crate::node::core::RequestIds;
use crate::node::reads::{ReadAnswer, ReadQuery};

pub struct LedgerClient {
    transport: HttpTransport,
    nodes: Vec<String>,
    timeout: Duration,
    /// Index into `nodes` of the node that answered last (likely the leader).
    last_good: parking_lot::Mutex<usize>,
    request_ids: RequestIds,
}

/// A random origin for this client's request ids: tools have no node id, and two `ctl`
/// processes must not share ids.
fn random_origin() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}

impl LedgerClient {
    /// `nodes` are raft addresses (`host:port`); `timeout` bounds one whole call.
    pub fn new(nodes: Vec<String>, secret: &str, timeout: Duration) -> Self {
        Self::with_tls(nodes, secret, timeout, None)
    }

    /// Like [`LedgerClient::new`], over mutual TLS when `tls` is given (a group whose
    /// replicas speak TLS answers nothing else).
    pub fn with_tls(
        nodes: Vec<String>,
        secret: &str,
        timeout: Duration,
        tls: Option<&PeerTls>,
    ) -> Self {
        Self {
            // Node id 0 is never a member: the fault switch of a node cannot single it out.
            transport: HttpTransport::new(
                0,
                Arc::from(secret),
                Arc::new(FaultSwitch::default()),
                Duration::from_millis(300),
                tls,
            ),
            nodes,
            timeout,
            last_good: parking_lot::Mutex::new(0),
            request_ids: RequestIds::new(random_origin(), crate::node::wall_clock_ms()),
        }
    }

    /// The address that answered the last call.
    pub fn last_leader(&self) -> Option<&str> {
        self.nodes.get(*self.last_good.lock()).map(String::as_str)
    }

    /// Tries the nodes in turn until one answers within the timeout. Every request here may
    /// be repeated: writes carry one request id across attempts, reads change nothing, and
    /// membership changes are idempotent. A call that was sent but never answered ends as
    /// `OutcomeUnknown` (a write may have applied).
    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        request: &Req,
    ) -> Result<Resp, LedgerError> {
        let body = encode(request)?;
        let deadline = Instant::now() + self.timeout;
        let mut next = *self.last_good.lock();
        let mut last_error = LedgerError::NoLeader;
        let mut maybe_applied = false;
        let mut refusals = 0;
        while Instant::now() < deadline && !self.nodes.is_empty() {
            let index = next % self.nodes.len();
            next += 1;
            let per_call = deadline
                .saturating_duration_since(Instant::now())
                .min(Duration::from_secs(1));
            let sent = self
                .transport
                .post(None, &self.nodes[index], path, body.clone(), per_call)
                .await;
            let answer: Result<Resp, WireError> = match sent {
                Ok(bytes) => decode(&bytes)?,
                Err(e) => {
                    maybe_applied |= crate::node::may_have_reached_the_handler(&e);
                    refusals += usize::from(refuses_the_secret(&e));
                    last_error = LedgerError::Unreachable(e.to_string());
                    // Once every node has refused this client's secret, trying again until
                    // the deadline only ends in a timeout that hides the cause.
                    if refusals >= self.nodes.len() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            };
            match answer {
                Ok(resp) => {
                    *self.last_good.lock() = index;
                    return Ok(resp);
                }
                Err(e) if e.retry => {
                    maybe_applied |= e.maybe_applied;
                    last_error = LedgerError::NoLeader;
                    if next % self.nodes.len() == *self.last_good.lock() % self.nodes.len() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                Err(e) => return Err(LedgerError::Rejected(e.message)),
            }
        }
        if maybe_applied {
            return Err(LedgerError::OutcomeUnknown(last_error.to_string()));
        }
        Err(last_error)
    }

    /// Writes through whichever node leads; retried under one request id, so it applies at
    /// most once.
    pub async fn write(&self, command: &Command) -> Result<CommandResponse, LedgerError> {
        let request = WriteRequest {
            id: Some(self.request_ids.next()),
            command: command.clone(),
        };
        self.call("/ledger/write", &request).await
    }

    pub async fn read(&self, query: &ReadQuery) -> Result<ReadAnswer, LedgerError> {
        self.call("/ledger/read", query).await.map_err(|e| match e {
            LedgerError::OutcomeUnknown(message) => LedgerError::Unreachable(message),
            other => other,
        })
    }

    pub async fn change_membership(&self, change: &MembershipChange) -> Result<(), LedgerError> {
        self.call("/ledger/membership", change).await
    }
}

/// A node answered that the cluster secret this client sent is not its own.
fn refuses_the_secret(error: &TransportError) -> bool {
    matches!(error, TransportError::Status { status, .. } if *status == http::StatusCode::UNAUTHORIZED)
}
