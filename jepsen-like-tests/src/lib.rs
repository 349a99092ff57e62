//! A Jepsen-style chaos suite for a Switchyard cluster, built in Rust because Jepsen itself
//! (Clojure) cannot be installed here.
//!
//! The pieces, each usable on its own:
//! * [`history`]: operations recorded as invoke → ok / fail / info, written as JSON lines.
//! * [`checker`]: verdicts over a history plus the [`state::FinalStates`] read from every node
//!   (budget safety, lost writes, override rules, convergence, availability, and a
//!   Wing–Gong linearizability search of the override registry).
//! * [`nemesis`]: fault primitives (process kill/pause, network namespaces, iptables
//!   partitions, a fault-injecting TCP proxy, clock skew) and the seeded [`nemesis::Schedule`].
//! * [`cluster`]: the [`cluster::Cluster`] trait the runner drives, and
//!   [`cluster::LocalProcessCluster`], which runs N real processes from argument templates.
//! * [`workload`]: the [`workload::Workload`] trait and the quota/override/affinity mix.
//! * [`runner`]: one run end to end (setup, clients + nemesis, heal, final reads, checks,
//!   report, results folder).
//! * [`sim`]: an in-memory cluster with switchable bugs, so the whole loop and every checker
//!   can be exercised without a live cluster.
//! * [`switchyard`]: the node API and transport for real `switchyard serve` replicas.

pub mod checker;
pub mod cluster;
pub mod history;
pub mod nemesis;
pub mod runner;
mod serde_pairs;
pub mod sim;
pub mod state;
pub mod switchyard;
pub mod workload;

/// A node of the cluster under test, numbered from 1.
pub type NodeId = u32;
