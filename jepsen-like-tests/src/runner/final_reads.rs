//! The final reads: after the clients stop, read every node in rounds until all agree or the
//! convergence bound has passed; the last round is what the checkers judge.

use std::collections::BTreeMap;

use super::config::RunConfig;
use crate::cluster::Cluster;
use crate::history::Recorder;
use crate::state::{FinalStates, NodeRead, NodeState};

fn agree(reads: &BTreeMap<crate::NodeId, NodeRead>) -> bool {
    let mut states = reads
        .values()
        .map(|r| r.state.as_ref().map(NodeState::replicated_part));
    match states.next() {
        Some(Ok(first)) => states.all(|s| s.as_ref() == Ok(&first)),
        _ => false,
    }
}

pub(crate) async fn read_until_converged(
    cluster: &impl Cluster,
    recorder: &Recorder,
    config: &RunConfig,
    healed_at_ns: Option<u64>,
) -> FinalStates {
    let quiesced_at_ns = recorder.elapsed_ns();
    let bound_ns = u64::try_from(config.check.convergence_bound.as_nanos()).unwrap_or(u64::MAX);
    loop {
        let mut nodes = BTreeMap::new();
        for node in cluster.nodes() {
            let state = cluster
                .read_final_state(node)
                .await
                .map_err(|e| e.to_string());
            let read_at_ns = recorder.elapsed_ns();
            nodes.insert(node, NodeRead { read_at_ns, state });
        }
        let now = recorder.elapsed_ns();
        let converged = agree(&nodes);
        if converged || now.saturating_sub(quiesced_at_ns) >= bound_ns {
            if !converged {
                tracing::warn!("nodes did not agree within the convergence bound");
            }
            return FinalStates {
                healed_at_ns,
                quiesced_at_ns: Some(quiesced_at_ns),
                converged_at_ns: converged.then_some(now),
                nodes,
            };
        }
        tokio::time::sleep(config.final_read_interval).await;
    }
}
