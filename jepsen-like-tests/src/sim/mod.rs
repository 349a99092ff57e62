//! An in-memory "cluster" with the failure behaviour of the real one, in broad strokes: a
//! dead node refuses connections, a paused one never answers, a node without a quorum
//! refuses with `quota_ledger_unreachable`, link faults add latency. It drives the whole
//! runner loop without processes (fast, deterministic under tokio's paused clock), and its
//! [`SimBugs`] each break one rule, to show the matching checker catches it end to end.

mod bugs;
mod ledger;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::QuotaScope;
use tokio::time::Instant;

use crate::NodeId;
use crate::cluster::{Cluster, ClusterError, Endpoint};
use crate::history::{ErrorInfo, Op, OpResult, OverrideView};
use crate::nemesis::PartitionPlan;
use crate::nemesis::proxy::LinkFault;
use crate::state::NodeState;
use crate::workload::{Completion, MixConfig, OpTransport, QuotaMix, QuotaWorkload, WorkloadError};
use ledger::SimLedger;

pub use bugs::{SimBugs, UnknownBug};

#[derive(Clone, Debug, Default)]
struct SimNode {
    alive: bool,
    paused: bool,
    clock_offset_ms: i64,
    link: LinkFault,
}

#[derive(Debug)]
struct World {
    nodes: BTreeMap<NodeId, SimNode>,
    plan: PartitionPlan,
    ledger: SimLedger,
    stale_listing: Option<Vec<OverrideView>>,
    served: u64,
    rng: StdRng,
}

enum Access {
    Refused,
    Silent,
    NoQuorum,
    Serve,
}

impl World {
    fn access(&self, node: NodeId) -> Access {
        match self.nodes.get(&node) {
            None => Access::Refused,
            Some(n) if !n.alive => Access::Refused,
            Some(n) if n.paused => Access::Silent,
            Some(_) => {
                let reachable = self
                    .nodes
                    .iter()
                    .filter(|(id, n)| n.alive && !n.paused && self.plan.allows(node, **id))
                    .count();
                if reachable * 2 > self.nodes.len() {
                    Access::Serve
                } else {
                    Access::NoQuorum
                }
            }
        }
    }

    fn leader(&self) -> Option<NodeId> {
        self.nodes
            .keys()
            .copied()
            .find(|&n| matches!(self.access(n), Access::Serve))
    }
}

/// The in-memory cluster; clones of its transport share its state.
pub struct SimCluster {
    world: Arc<Mutex<World>>,
    bugs: SimBugs,
    nodes: Vec<NodeId>,
}

impl SimCluster {
    pub fn new(nodes: u32, bugs: SimBugs, seed: u64) -> Self {
        let ids: Vec<NodeId> = (1..=nodes).collect();
        let world = World {
            nodes: ids.iter().map(|&id| (id, SimNode::default())).collect(),
            plan: PartitionPlan::default(),
            ledger: SimLedger::default(),
            stale_listing: None,
            served: 0,
            rng: StdRng::seed_from_u64(seed),
        };
        Self {
            world: Arc::new(Mutex::new(world)),
            bugs,
            nodes: ids,
        }
    }

    pub fn transport(&self) -> SimTransport {
        SimTransport {
            world: self.world.clone(),
            bugs: self.bugs.clone(),
        }
    }

    pub fn workload(&self, mix: MixConfig) -> QuotaWorkload<SimTransport> {
        QuotaWorkload::new(QuotaMix::new(mix), self.transport())
    }

    /// The clock offset last set on `node` (the sim records skew, it does not act on it).
    pub fn clock_offset_ms(&self, node: NodeId) -> i64 {
        self.world
            .lock()
            .nodes
            .get(&node)
            .map_or(0, |n| n.clock_offset_ms)
    }

    fn with_node<T>(
        &self,
        node: NodeId,
        f: impl FnOnce(&mut SimNode) -> T,
    ) -> Result<T, ClusterError> {
        let mut world = self.world.lock();
        world
            .nodes
            .get_mut(&node)
            .map(f)
            .ok_or(ClusterError::UnknownNode(node))
    }
}

impl Cluster for SimCluster {
    fn nodes(&self) -> Vec<NodeId> {
        self.nodes.clone()
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        self.nodes
            .iter()
            .map(|&node| Endpoint {
                node,
                client_addr: SocketAddr::from(([127, 0, 0, 1], 10_000 + node as u16)),
            })
            .collect()
    }

    async fn start(&self) -> Result<(), ClusterError> {
        for node in self.world.lock().nodes.values_mut() {
            node.alive = true;
        }
        Ok(())
    }

    async fn stop(&self) -> Result<(), ClusterError> {
        for node in self.world.lock().nodes.values_mut() {
            node.alive = false;
        }
        Ok(())
    }

    async fn start_node(&self, node: NodeId) -> Result<(), ClusterError> {
        self.with_node(node, |n| {
            n.alive = true;
            n.paused = false;
        })
    }

    async fn kill(&self, node: NodeId) -> Result<(), ClusterError> {
        self.with_node(node, |n| n.alive = false)?;
        if self.bugs.lose_writes_on_kill {
            self.world.lock().ledger.lose_latest_write();
        }
        Ok(())
    }

    async fn pause(&self, node: NodeId) -> Result<(), ClusterError> {
        self.with_node(node, |n| n.paused = true)
    }

    async fn resume(&self, node: NodeId) -> Result<(), ClusterError> {
        self.with_node(node, |n| n.paused = false)
    }

    async fn partition(&self, plan: &PartitionPlan) -> Result<(), ClusterError> {
        self.world.lock().plan = plan.clone();
        Ok(())
    }

    async fn heal_network(&self) -> Result<(), ClusterError> {
        self.world.lock().plan = PartitionPlan::default();
        Ok(())
    }

    async fn set_link_fault(&self, to: NodeId, fault: LinkFault) -> Result<(), ClusterError> {
        self.with_node(to, |n| n.link = fault)
    }

    async fn skew_clock(&self, node: NodeId, offset_ms: i64) -> Result<(), ClusterError> {
        self.with_node(node, |n| n.clock_offset_ms = offset_ms)
    }

    async fn leader(&self) -> Result<Option<NodeId>, ClusterError> {
        Ok(self.world.lock().leader())
    }

    async fn recover_all(&self) -> Result<(), ClusterError> {
        let mut world = self.world.lock();
        world.plan = PartitionPlan::default();
        for node in world.nodes.values_mut() {
            *node = SimNode {
                alive: true,
                ..SimNode::default()
            };
        }
        Ok(())
    }

    async fn read_final_state(&self, node: NodeId) -> Result<NodeState, ClusterError> {
        let world = self.world.lock();
        if !matches!(world.access(node), Access::Serve | Access::NoQuorum) {
            return Err(ClusterError::Node {
                node,
                message: "not answering".into(),
            });
        }
        let mut state = world.ledger.node_state(Instant::now());
        if self.bugs.diverge && Some(&node) == self.nodes.last() {
            state.affinity.insert(u64::MAX, "phantom-worker".into());
        }
        Ok(state)
    }
}

/// Operations against the in-memory cluster.
#[derive(Clone)]
pub struct SimTransport {
    world: Arc<Mutex<World>>,
    bugs: SimBugs,
}

/// Base latency of one simulated request.
const LATENCY: Duration = Duration::from_millis(3);

impl SimTransport {
    /// What the node answers now, or `None` if it never answers.
    fn answer(&self, node: NodeId, op: &Op) -> Option<Completion> {
        let mut world = self.world.lock();
        match world.access(node) {
            Access::Refused => return Some(Completion::Fail(ErrorInfo::new("connection_refused"))),
            Access::Silent => return None,
            Access::NoQuorum => {
                return Some(Completion::Fail(ErrorInfo::http(
                    503,
                    "quota_ledger_unreachable",
                )));
            }
            Access::Serve => {}
        }
        world.served += 1;
        if self.bugs.unclear_errors && world.served % 25 == 0 {
            return Some(Completion::Fail(ErrorInfo::http(500, "internal")));
        }
        if self.bugs.hang && world.served % 30 == 0 {
            return None;
        }
        if let (Op::ListOverrides, true) = (op, self.bugs.stale_listing) {
            let current = world.ledger.listing();
            let records = world.stale_listing.get_or_insert(current).clone();
            return Some(Completion::Ok(OpResult::Overrides { records }));
        }
        let bugs = self.bugs.clone();
        Some(world.ledger.apply(op, Instant::now(), &bugs))
    }

    fn link_delay(&self, node: NodeId) -> Duration {
        let mut world = self.world.lock();
        let Some(link) = world.nodes.get(&node).map(|n| n.link.clone()) else {
            return Duration::ZERO;
        };
        let mut delay = link.delay;
        if !link.jitter.is_zero() {
            delay += link.jitter.mul_f64(world.rng.random::<f64>());
        }
        if link.loss > 0.0 && world.rng.random_bool(link.loss.clamp(0.0, 1.0)) {
            delay += link.retransmit_delay;
        }
        delay
    }
}

impl OpTransport for SimTransport {
    async fn setup(
        &self,
        _endpoints: &[Endpoint],
        budgets: &BTreeMap<QuotaScope, u64>,
    ) -> Result<(), WorkloadError> {
        self.world.lock().ledger = SimLedger::with_budgets(budgets);
        Ok(())
    }

    async fn execute(&self, endpoint: &Endpoint, op: &Op) -> Completion {
        tokio::time::sleep(LATENCY + self.link_delay(endpoint.node)).await;
        match self.answer(endpoint.node, op) {
            Some(completion) => completion,
            // A silent node: the client's own timeout ends this.
            None => std::future::pending().await,
        }
    }
}
