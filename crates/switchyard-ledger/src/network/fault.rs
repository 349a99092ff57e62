//! A switch that drops ledger traffic to and from chosen nodes: the partition injector the
//! tests use (and the chaos suite will generalise). Checked on both ends of every RPC.

use parking_lot::RwLock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::command::NodeId;

#[derive(Debug, Default)]
pub struct FaultSwitch {
    isolated: AtomicBool,
    blocked_peers: RwLock<HashSet<NodeId>>,
}

impl FaultSwitch {
    /// Drops every RPC this node sends or receives.
    pub fn isolate(&self) {
        self.isolated.store(true, Ordering::SeqCst);
    }

    /// Undoes `isolate` and every `block_peer`.
    pub fn heal(&self) {
        self.isolated.store(false, Ordering::SeqCst);
        self.blocked_peers.write().clear();
    }

    /// Drops RPCs between this node and `peer` only.
    pub fn block_peer(&self, peer: NodeId) {
        self.blocked_peers.write().insert(peer);
    }

    pub fn is_isolated(&self) -> bool {
        self.isolated.load(Ordering::SeqCst)
    }

    /// Whether traffic with `peer` (unknown peer: `None`) may pass.
    pub fn allows(&self, peer: Option<NodeId>) -> bool {
        if self.is_isolated() {
            return false;
        }
        peer.is_none_or(|p| !self.blocked_peers.read().contains(&p))
    }
}
