//! A client for the ledger's node-to-node HTTP surface, for tools outside a node
//! (`switchyard ctl`, the kill -9 test): it finds the leader by trying the known nodes.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::codec::{decode, encode};
use crate::command::{Command, CommandResponse};
use crate::error::{LedgerError, WireError};
use crate::network::{FaultSwitch, HttpTransport};
use crate::node::MembershipChange;
use crate::node::reads::{ReadAnswer, ReadQuery};

pub struct LedgerClient {
    transport: HttpTransport,
    nodes: Vec<String>,
    timeout: Duration,
    /// Index into `nodes` of the node that answered last (likely the leader).
    last_good: parking_lot::Mutex<usize>,
}

impl LedgerClient {
    /// `nodes` are raft addresses (`host:port`); `timeout` bounds one whole call.
    pub fn new(nodes: Vec<String>, secret: &str, timeout: Duration) -> Self {
        Self {
            // Node id 0 is never a member: the fault switch of a node cannot single it out.
            transport: HttpTransport::new(
                0,
                Arc::from(secret),
                Arc::new(FaultSwitch::default()),
                Duration::from_millis(300),
            ),
            nodes,
            timeout,
            last_good: parking_lot::Mutex::new(0),
        }
    }

    /// The address that answered the last call.
    pub fn last_leader(&self) -> Option<&str> {
        self.nodes.get(*self.last_good.lock()).map(String::as_str)
    }

    async fn call<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        path: &str,
        request: &Req,
        idempotent: bool,
    ) -> Result<Resp, LedgerError> {
        let body = encode(request)?;
        let deadline = Instant::now() + self.timeout;
        let mut next = *self.last_good.lock();
        let mut last_error = LedgerError::NoLeader;
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
                    last_error = LedgerError::Unreachable(e.to_string());
                    if !idempotent && !matches!(e, crate::network::TransportError::Connect(_)) {
                        return Err(last_error);
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
                    last_error = LedgerError::NoLeader;
                    if next % self.nodes.len() == *self.last_good.lock() % self.nodes.len() {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
                Err(e) => return Err(LedgerError::Rejected(e.message)),
            }
        }
        Err(last_error)
    }

    pub async fn write(&self, command: &Command) -> Result<CommandResponse, LedgerError> {
        self.call("/ledger/write", command, command.is_idempotent())
            .await
    }

    pub async fn read(&self, query: &ReadQuery) -> Result<ReadAnswer, LedgerError> {
        self.call("/ledger/read", query, true).await
    }

    pub async fn change_membership(&self, change: &MembershipChange) -> Result<(), LedgerError> {
        self.call("/ledger/membership", change, true).await
    }
}
