//! The fault vocabulary: which families exist ([`NemesisKind`]), whom a fault hits
//! ([`Target`]) and the faults themselves ([`Fault`], [`PartitionShape`]). Kept apart from the
//! module root so the schedule and the partition planner can name these types without
//! depending on the root that re-exports them.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::NodeId;

/// A family of faults, as named on the command line (`--nemesis kill,partition,pause`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NemesisKind {
    /// kill -9 a random node or the leader, restart it at the end of the window.
    Kill,
    /// SIGSTOP a random node or the leader, SIGCONT at the end of the window.
    Pause,
    /// iptables DROP partitions: majority/minority, isolate the leader or a node, bridge.
    Partition,
    /// Packet loss on a node's inbound links (fault-injecting proxy).
    Loss,
    /// Delay on a node's inbound links (fault-injecting proxy).
    Delay,
    /// Skew a node's injectable clock.
    Clock,
}

impl NemesisKind {
    pub const ALL: [NemesisKind; 6] = [
        NemesisKind::Kill,
        NemesisKind::Pause,
        NemesisKind::Partition,
        NemesisKind::Loss,
        NemesisKind::Delay,
        NemesisKind::Clock,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NemesisKind::Kill => "kill",
            NemesisKind::Pause => "pause",
            NemesisKind::Partition => "partition",
            NemesisKind::Loss => "loss",
            NemesisKind::Delay => "delay",
            NemesisKind::Clock => "clock",
        }
    }

    /// Parses a comma-separated list (`all` = every kind); order and duplicates are normalised.
    pub fn parse_list(list: &str) -> Result<Vec<NemesisKind>, UnknownNemesis> {
        let mut kinds = Vec::new();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            if name.eq_ignore_ascii_case("all") {
                kinds.extend(NemesisKind::ALL);
            } else {
                kinds.push(name.parse()?);
            }
        }
        kinds.sort_unstable();
        kinds.dedup();
        Ok(kinds)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown nemesis `{0}` (expected kill, pause, partition, loss, delay, clock (or clock-skew) or all)"
)]
pub struct UnknownNemesis(pub String);

impl FromStr for NemesisKind {
    type Err = UnknownNemesis;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.trim().eq_ignore_ascii_case("clock-skew") {
            return Ok(NemesisKind::Clock);
        }
        NemesisKind::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| UnknownNemesis(s.to_owned()))
    }
}

impl fmt::Display for NemesisKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whom a fault hits; `Leader` is resolved when the fault starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    Node(NodeId),
    Leader,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Node(node) => write!(f, "n{node}"),
            Target::Leader => f.write_str("the leader"),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PartitionShape {
    /// The listed nodes (a minority) are cut off from the rest.
    MajorityMinority { minority: Vec<NodeId> },
    /// One node is cut off from all others.
    Isolate(Target),
    /// Two halves that only `bridge` can reach both of (not transitive).
    Bridge { bridge: NodeId },
}

/// One fault, applied at a window's start and undone at its end.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    Kill(Target),
    Pause(Target),
    Partition(PartitionShape),
    /// Per mille of inbound segments to `to` that are lost (and retransmitted late).
    Loss {
        to: NodeId,
        per_mille: u32,
    },
    Delay {
        to: NodeId,
        delay_ms: u64,
        jitter_ms: u64,
    },
    ClockSkew {
        target: Target,
        offset_ms: i64,
    },
}

impl Fault {
    pub fn kind(&self) -> NemesisKind {
        match self {
            Fault::Kill(_) => NemesisKind::Kill,
            Fault::Pause(_) => NemesisKind::Pause,
            Fault::Partition(_) => NemesisKind::Partition,
            Fault::Loss { .. } => NemesisKind::Loss,
            Fault::Delay { .. } => NemesisKind::Delay,
            Fault::ClockSkew { .. } => NemesisKind::Clock,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Kill(target) => write!(f, "kill -9 {target}"),
            Fault::Pause(target) => write!(f, "SIGSTOP {target}"),
            Fault::Partition(PartitionShape::MajorityMinority { minority }) => {
                write!(f, "partition minority {minority:?} from the majority")
            }
            Fault::Partition(PartitionShape::Isolate(target)) => write!(f, "isolate {target}"),
            Fault::Partition(PartitionShape::Bridge { bridge }) => {
                write!(f, "bridge partition through n{bridge}")
            }
            Fault::Loss { to, per_mille } => {
                write!(
                    f,
                    "lose {:.1}% of segments to n{to}",
                    *per_mille as f64 / 10.0
                )
            }
            Fault::Delay {
                to,
                delay_ms,
                jitter_ms,
            } => write!(f, "delay links to n{to} by {delay_ms}±{jitter_ms} ms"),
            Fault::ClockSkew { target, offset_ms } => {
                write!(f, "skew the clock of {target} by {offset_ms:+} ms")
            }
        }
    }
}
