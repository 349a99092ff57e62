//! Plays a [`Schedule`] against a cluster: each window's fault is applied at its start and
//! undone at its end, then everything is healed at `heal_at`. Every step lands in the history
//! (as fault events) and in the list of applied faults for the report. A fault the cluster
//! cannot do here (unsupported) is recorded as skipped, with the reason.

use serde::{Deserialize, Serialize};
use tokio::time::{Instant, sleep_until};

use crate::NodeId;
use crate::cluster::{Cluster, ClusterError};
use crate::history::{FaultPhase, Recorder};
use crate::nemesis::proxy::LinkFault;
use crate::nemesis::{Fault, PartitionPlan, Schedule, Target};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultOutcome {
    Applied,
    Skipped(String),
    Failed(String),
}

/// What happened to one scheduled window (or the final heal).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AppliedFault {
    pub window: u64,
    pub kind: String,
    pub description: String,
    pub nodes: Vec<NodeId>,
    pub started_s: f64,
    pub ended_s: Option<f64>,
    pub outcome: FaultOutcome,
    /// Undoing the fault failed (the final heal still runs).
    pub undo_error: Option<String>,
}

enum Refusal {
    Skip(String),
    Fail(String),
}

impl From<ClusterError> for Refusal {
    fn from(e: ClusterError) -> Self {
        if e.is_unsupported() {
            Refusal::Skip(e.to_string())
        } else {
            Refusal::Fail(e.to_string())
        }
    }
}

async fn resolve(cluster: &impl Cluster, target: Target) -> Result<NodeId, Refusal> {
    match target {
        Target::Node(node) => Ok(node),
        Target::Leader => match cluster.leader().await? {
            Some(node) => Ok(node),
            None => Err(Refusal::Skip("no leader could be found".into())),
        },
    }
}

/// Applies `fault`; answers the nodes it hit.
async fn apply(cluster: &impl Cluster, fault: &Fault) -> Result<Vec<NodeId>, Refusal> {
    match fault {
        Fault::Kill(target) => {
            let node = resolve(cluster, *target).await?;
            cluster.kill(node).await?;
            Ok(vec![node])
        }
        Fault::Pause(target) => {
            let node = resolve(cluster, *target).await?;
            cluster.pause(node).await?;
            Ok(vec![node])
        }
        Fault::Partition(shape) => {
            let all = cluster.nodes();
            let leader = match shape {
                crate::nemesis::PartitionShape::Isolate(Target::Leader) => {
                    Some(resolve(cluster, Target::Leader).await?)
                }
                _ => None,
            };
            let plan = PartitionPlan::from_shape(shape, &all, leader);
            cluster.partition(&plan).await?;
            // Name the cut-off side; a bridge has none (every node sees a majority), so name
            // the nodes that lost links.
            let majority = plan.majority_side(&all);
            let minority: Vec<NodeId> = all
                .iter()
                .copied()
                .filter(|n| !majority.contains(n))
                .collect();
            if minority.is_empty() {
                Ok(all
                    .into_iter()
                    .filter(|&n| !plan.blocked_peers(n).is_empty())
                    .collect())
            } else {
                Ok(minority)
            }
        }
        Fault::Loss { to, per_mille } => {
            let fault = LinkFault::loss(f64::from(*per_mille) / 1000.0);
            cluster.set_link_fault(*to, fault).await?;
            Ok(vec![*to])
        }
        Fault::Delay {
            to,
            delay_ms,
            jitter_ms,
        } => {
            let fault = LinkFault::delay(
                std::time::Duration::from_millis(*delay_ms),
                std::time::Duration::from_millis(*jitter_ms),
            );
            cluster.set_link_fault(*to, fault).await?;
            Ok(vec![*to])
        }
        Fault::ClockSkew { target, offset_ms } => {
            let node = resolve(cluster, *target).await?;
            cluster.skew_clock(node, *offset_ms).await?;
            Ok(vec![node])
        }
    }
}

async fn undo(cluster: &impl Cluster, fault: &Fault, nodes: &[NodeId]) -> Result<(), ClusterError> {
    match fault {
        Fault::Kill(_) => {
            for &node in nodes {
                cluster.start_node(node).await?;
            }
            Ok(())
        }
        Fault::Pause(_) => {
            for &node in nodes {
                cluster.resume(node).await?;
            }
            Ok(())
        }
        Fault::Partition(_) => cluster.heal_network().await,
        Fault::Loss { to, .. } | Fault::Delay { to, .. } => {
            cluster.set_link_fault(*to, LinkFault::default()).await
        }
        Fault::ClockSkew { .. } => {
            for &node in nodes {
                cluster.skew_clock(node, 0).await?;
            }
            Ok(())
        }
    }
}

fn seconds(recorder: &Recorder) -> f64 {
    recorder.elapsed_ns() as f64 / 1e9
}

/// Runs the schedule from `start`; answers the applied faults and when the final heal ended.
pub(crate) async fn drive(
    cluster: &impl Cluster,
    schedule: &Schedule,
    recorder: &Recorder,
    start: Instant,
) -> (Vec<AppliedFault>, Option<u64>) {
    let mut applied = Vec::new();
    for scheduled in &schedule.faults {
        sleep_until(start + scheduled.start).await;
        let kind = scheduled.fault.kind().as_str();
        let description = scheduled.fault.to_string();
        let started_s = seconds(recorder);
        let mut record = AppliedFault {
            window: scheduled.window,
            kind: kind.to_owned(),
            description: description.clone(),
            nodes: Vec::new(),
            started_s,
            ended_s: None,
            outcome: FaultOutcome::Applied,
            undo_error: None,
        };
        match apply(cluster, &scheduled.fault).await {
            Ok(nodes) => {
                recorder.fault(
                    scheduled.window,
                    FaultPhase::Start,
                    kind,
                    nodes.clone(),
                    description.clone(),
                );
                tracing::info!(window = scheduled.window, fault = %description, ?nodes, "fault started");
                sleep_until(start + scheduled.end).await;
                if let Err(e) = undo(cluster, &scheduled.fault, &nodes).await {
                    tracing::warn!(window = scheduled.window, error = %e, "undoing a fault failed");
                    record.undo_error = Some(e.to_string());
                }
                recorder.fault(
                    scheduled.window,
                    FaultPhase::Stop,
                    kind,
                    nodes.clone(),
                    description,
                );
                record.nodes = nodes;
                record.ended_s = Some(seconds(recorder));
            }
            Err(Refusal::Skip(reason)) => {
                recorder.fault(
                    scheduled.window,
                    FaultPhase::Skipped,
                    kind,
                    Vec::new(),
                    reason.clone(),
                );
                tracing::info!(window = scheduled.window, fault = %description, %reason, "fault skipped");
                record.outcome = FaultOutcome::Skipped(reason);
            }
            Err(Refusal::Fail(error)) => {
                recorder.fault(
                    scheduled.window,
                    FaultPhase::Failed,
                    kind,
                    Vec::new(),
                    error.clone(),
                );
                tracing::warn!(window = scheduled.window, fault = %description, %error, "fault failed");
                record.outcome = FaultOutcome::Failed(error);
            }
        }
        applied.push(record);
    }
    sleep_until(start + schedule.heal_at).await;
    let started_s = seconds(recorder);
    let (outcome, healed_at) = match cluster.recover_all().await {
        Ok(()) => (FaultOutcome::Applied, Some(recorder.elapsed_ns())),
        Err(e) => (FaultOutcome::Failed(e.to_string()), None),
    };
    let phase = match outcome {
        FaultOutcome::Applied => FaultPhase::Stop,
        _ => FaultPhase::Failed,
    };
    let detail = match &outcome {
        FaultOutcome::Failed(e) => e.clone(),
        _ => "restart, resume, heal, clear link faults, reset clocks".to_owned(),
    };
    recorder.fault(
        Schedule::HEAL_WINDOW,
        phase,
        "heal",
        cluster.nodes(),
        detail.clone(),
    );
    applied.push(AppliedFault {
        window: Schedule::HEAL_WINDOW,
        kind: "heal".into(),
        description: detail,
        nodes: cluster.nodes(),
        started_s,
        ended_s: Some(seconds(recorder)),
        outcome,
        undo_error: None,
    });
    (applied, healed_at)
}
