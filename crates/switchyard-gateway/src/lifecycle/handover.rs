//! Handing Raft leadership over before a leader stops.
//!
//! openraft 0.9 has no leadership-transfer call (it arrives in 0.10 as
//! `trigger().transfer_leader`), and a follower asked to `trigger().elect()` is refused by its
//! peers while the leader's lease holds. So a departing leader steps down instead
//! (`LedgerNode::step_down`): it stops sending heartbeats and housekeeping ticks and never
//! stands for election again, then waits, still a voter, until the followers' lease runs out
//! and they elect a successor (about `election_timeout_max` + `election_timeout_min..max` of
//! silence). Staying up as a voter matters: in a three-voter
//! group where another replica is already down, the survivor cannot win without this vote.
//! Meanwhile it proposes no new entries (writers are told there is no leader and retry until
//! the successor answers): under steady write traffic each replicated entry would otherwise
//! refresh the followers' lease, and no successor would be elected before the deadline.

use std::time::Duration;
use switchyard_ledger::LedgerNode;
use tracing::info;

/// What became of Raft leadership at shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handover {
    /// Clustering is off: no Raft group.
    NotClustered,
    /// This replica was not the leader: nothing to hand over.
    NotLeader,
    /// The only voter: nobody to hand over to.
    Alone,
    /// Another node leads now.
    HandedOver(u64),
    /// No successor was elected in time; the group elects one after this node stops.
    TimedOut,
}

impl Handover {
    pub const LABELS: [&'static str; 5] = [
        "not_clustered",
        "not_leader",
        "alone",
        "handed_over",
        "timed_out",
    ];

    pub fn label(self) -> &'static str {
        match self {
            Handover::NotClustered => "not_clustered",
            Handover::NotLeader => "not_leader",
            Handover::Alone => "alone",
            Handover::HandedOver(_) => "handed_over",
            Handover::TimedOut => "timed_out",
        }
    }

    pub fn successor(self) -> Option<u64> {
        match self {
            Handover::HandedOver(id) => Some(id),
            _ => None,
        }
    }
}

/// Steps down if this node leads, and waits up to `within` for a successor.
pub async fn step_down(node: &LedgerNode, within: Duration) -> Handover {
    let status = node.status();
    let me = node.id();
    if status.leader != Some(me) {
        return Handover::NotLeader;
    }
    if status.voters.iter().all(|&id| id == me) {
        return Handover::Alone;
    }
    node.step_down();
    info!(
        node = me,
        "stepping down as Raft leader: heartbeats stopped"
    );
    let mut metrics = node.raft().metrics();
    let successor = async {
        loop {
            if let Some(leader) = metrics.borrow().current_leader.filter(|&l| l != me) {
                return Some(leader);
            }
            if metrics.changed().await.is_err() {
                return None;
            }
        }
    };
    match tokio::time::timeout(within, successor).await {
        Ok(Some(leader)) => Handover::HandedOver(leader),
        _ => {
            // Still the leader: let it serve the writes of its own shutdown (lease release,
            // last spend report) normally.
            node.resume_leading();
            Handover::TimedOut
        }
    }
}
