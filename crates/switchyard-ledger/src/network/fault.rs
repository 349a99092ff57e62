//! A switch that drops ledger traffic to and from chosen nodes: the partition injector the
//! tests use (and the chaos suite will generalise). Checked on both ends of every RPC. It
//! also delays this node's calls, each way, to stand in for replicas in other regions.

use parking_lot::RwLock;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::command::NodeId;

#[derive(Debug, Default)]
pub struct FaultSwitch {
    isolated: AtomicBool,
    blocked_peers: RwLock<HashSet<NodeId>>,
    one_way_delay_us: AtomicU64,
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

    /// Holds every call this node makes for `delay` before sending it and again before
    /// reading its answer: a link with that one-way latency (zero turns it off).
    pub fn set_one_way_delay(&self, delay: Duration) {
        let micros = u64::try_from(delay.as_micros()).unwrap_or(u64::MAX);
        self.one_way_delay_us.store(micros, Ordering::Relaxed);
    }

    pub fn one_way_delay(&self) -> Duration {
        Duration::from_micros(self.one_way_delay_us.load(Ordering::Relaxed))
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
