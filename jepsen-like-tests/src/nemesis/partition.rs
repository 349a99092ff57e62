//! Partitions as a set of cut links, built from a [`PartitionShape`], and their iptables
//! realisation inside node namespaces: silent `DROP`s (not `REJECT`), so peers see timeouts as
//! on a real broken network, never fast refusals.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::net::SocketAddr;

use super::command::{CommandError, CommandRunner, args};
use super::fault::{PartitionShape, Target};
use super::netns::NetnsLab;
use crate::NodeId;

/// Which pairs of nodes cannot talk (symmetric; stored with the smaller id first).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionPlan {
    cut: BTreeSet<(NodeId, NodeId)>,
}

fn pair(a: NodeId, b: NodeId) -> (NodeId, NodeId) {
    (a.min(b), a.max(b))
}

impl PartitionPlan {
    /// Cuts every link between different groups; nodes in no group keep all their links.
    pub fn from_groups(groups: &[Vec<NodeId>]) -> Self {
        let mut cut = BTreeSet::new();
        for (i, left) in groups.iter().enumerate() {
            for right in groups.iter().skip(i + 1) {
                for &a in left {
                    for &b in right.iter().filter(|&&b| b != a) {
                        cut.insert(pair(a, b));
                    }
                }
            }
        }
        Self { cut }
    }

    pub fn isolate(node: NodeId, all: &[NodeId]) -> Self {
        let rest: Vec<NodeId> = all.iter().copied().filter(|&n| n != node).collect();
        Self::from_groups(&[vec![node], rest])
    }

    /// The remaining nodes split in two halves; `bridge` keeps links to both.
    pub fn bridge(bridge: NodeId, all: &[NodeId]) -> Self {
        let rest: Vec<NodeId> = all.iter().copied().filter(|&n| n != bridge).collect();
        let (left, right) = rest.split_at(rest.len() / 2);
        Self::from_groups(&[left.to_vec(), right.to_vec()])
    }

    /// `leader` resolves `Isolate(Leader)`; without one the plan isolates nobody.
    pub fn from_shape(shape: &PartitionShape, all: &[NodeId], leader: Option<NodeId>) -> Self {
        match shape {
            PartitionShape::MajorityMinority { minority } => {
                let majority: Vec<NodeId> = all
                    .iter()
                    .copied()
                    .filter(|n| !minority.contains(n))
                    .collect();
                Self::from_groups(&[minority.clone(), majority])
            }
            PartitionShape::Isolate(Target::Node(node)) => Self::isolate(*node, all),
            PartitionShape::Isolate(Target::Leader) => {
                leader.map_or_else(Self::default, |node| Self::isolate(node, all))
            }
            PartitionShape::Bridge { bridge } => Self::bridge(*bridge, all),
        }
    }

    pub fn allows(&self, a: NodeId, b: NodeId) -> bool {
        a == b || !self.cut.contains(&pair(a, b))
    }

    pub fn blocked_peers(&self, node: NodeId) -> Vec<NodeId> {
        self.cut
            .iter()
            .filter_map(|&(a, b)| match (a == node, b == node) {
                (true, _) => Some(b),
                (_, true) => Some(a),
                _ => None,
            })
            .collect()
    }

    pub fn is_empty(&self) -> bool {
        self.cut.is_empty()
    }

    /// Nodes that keep links with at least a majority of `all` (themselves included).
    pub fn majority_side(&self, all: &[NodeId]) -> Vec<NodeId> {
        all.iter()
            .copied()
            .filter(|&n| all.iter().filter(|&&m| self.allows(n, m)).count() * 2 > all.len())
            .collect()
    }
}

/// Applies plans with iptables inside each node's namespace. Each node drops what arrives from
/// a cut peer's address; when nodes talk through fault proxies (whose connections come from
/// the bridge address), each node also drops what it sends to a cut peer's proxy.
pub struct IptablesPartitioner<'a, R: CommandRunner> {
    lab: &'a NetnsLab<R>,
    proxy_of: Box<dyn Fn(NodeId) -> Option<SocketAddr> + Send + Sync + 'a>,
}

impl<'a, R: CommandRunner> IptablesPartitioner<'a, R> {
    pub fn new(lab: &'a NetnsLab<R>) -> Self {
        Self {
            lab,
            proxy_of: Box::new(|_| None),
        }
    }

    /// Peers are also reached through `proxy_of(peer)`.
    pub fn with_proxies(
        mut self,
        proxy_of: impl Fn(NodeId) -> Option<SocketAddr> + Send + Sync + 'a,
    ) -> Self {
        self.proxy_of = Box::new(proxy_of);
        self
    }

    /// Heals first, then installs the plan's rules.
    pub fn apply(&self, plan: &PartitionPlan) -> Result<(), CommandError> {
        self.heal()?;
        for &node in self.lab.nodes() {
            for peer in plan.blocked_peers(node) {
                let source = self.lab.node_ip(peer).to_string();
                self.lab.exec(
                    node,
                    "iptables",
                    &args(&["-w", "-A", "INPUT", "-s", &source, "-j", "DROP"]),
                )?;
                if let Some(proxy) = (self.proxy_of)(peer) {
                    let (ip, port) = (proxy.ip().to_string(), proxy.port().to_string());
                    self.lab.exec(
                        node,
                        "iptables",
                        &args(&[
                            "-w", "-A", "OUTPUT", "-p", "tcp", "-d", &ip, "--dport", &port, "-j",
                            "DROP",
                        ]),
                    )?;
                }
            }
        }
        Ok(())
    }

    /// Flushes the rules in every node's namespace (the namespaces hold nothing else).
    pub fn heal(&self) -> Result<(), CommandError> {
        for &node in self.lab.nodes() {
            self.lab
                .exec(node, "iptables", &args(&["-w", "-F", "INPUT"]))?;
            self.lab
                .exec(node, "iptables", &args(&["-w", "-F", "OUTPUT"]))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nemesis::Target;
    use crate::nemesis::command::RecordingRunner;

    const ALL: [NodeId; 5] = [1, 2, 3, 4, 5];

    #[test]
    fn majority_minority_cuts_across_only() {
        let shape = PartitionShape::MajorityMinority {
            minority: vec![2, 4],
        };
        let plan = PartitionPlan::from_shape(&shape, &ALL, None);
        assert!(!plan.allows(2, 1) && !plan.allows(4, 5));
        assert!(plan.allows(2, 4) && plan.allows(1, 3));
        assert_eq!(plan.majority_side(&ALL), vec![1, 3, 5]);
    }

    #[test]
    fn isolate_leader_needs_a_leader() {
        let shape = PartitionShape::Isolate(Target::Leader);
        assert!(PartitionPlan::from_shape(&shape, &ALL, None).is_empty());
        let plan = PartitionPlan::from_shape(&shape, &ALL, Some(3));
        assert_eq!(plan.blocked_peers(3), vec![1, 2, 4, 5]);
        assert_eq!(plan.blocked_peers(1), vec![3]);
    }

    #[test]
    fn bridge_node_sees_both_halves_which_cannot_see_each_other() {
        let plan = PartitionPlan::bridge(3, &ALL);
        assert!(plan.blocked_peers(3).is_empty());
        assert!(!plan.allows(1, 4) && !plan.allows(2, 5));
        assert!(plan.allows(1, 2) && plan.allows(4, 5));
        assert_eq!(
            plan.majority_side(&ALL),
            ALL.to_vec(),
            "each half plus the bridge is a majority: the non-transitive case Raft must survive"
        );
    }

    #[test]
    fn iptables_rules_drop_silently_in_the_right_namespaces() {
        let lab = NetnsLab::new(RecordingRunner::new(), "syt", 9, vec![1, 2, 3]).unwrap();
        let proxy = |peer: NodeId| Some(SocketAddr::from(([10, 213, 9, 254], 9000 + peer as u16)));
        let partitioner = IptablesPartitioner::new(&lab).with_proxies(proxy);
        partitioner
            .apply(&PartitionPlan::isolate(1, &[1, 2, 3]))
            .unwrap();
        let commands = lab.runner().commands();
        assert!(commands.contains(&"ip netns exec syt-n1 iptables -w -F INPUT".to_owned()));
        assert!(commands.contains(
            &"ip netns exec syt-n1 iptables -w -A INPUT -s 10.213.9.2 -j DROP".to_owned()
        ));
        assert!(commands.contains(
            &"ip netns exec syt-n2 iptables -w -A OUTPUT -p tcp -d 10.213.9.254 --dport 9001 -j DROP"
                .to_owned()
        ));
        assert!(!commands.iter().any(|c| c.contains("REJECT")));
        assert!(
            !commands
                .iter()
                .any(|c| c.contains("syt-n2") && c.contains("-s 10.213.9.3")),
            "2 and 3 stay connected"
        );
    }
}
