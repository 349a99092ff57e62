//! What the policy decided for one request, and the branch it is counted under.

use super::branches::*;
use super::deviation::Deviation;
use super::placement::PlacementKind;
use switchyard_core::WorkerId;

pub(super) enum Choice {
    Hit(WorkerId),
    Imbalanced(WorkerId),
    Migrate {
        worker: WorkerId,
        matched: usize,
        displaced: Vec<WorkerId>,
    },
    Placed(WorkerId, PlacementKind),
    /// A later turn sent past its conversation's saturated worker.
    Escaped(WorkerId),
    /// A later turn sent past its conversation's worker carrying a full batch.
    Relieved(WorkerId),
    LeastLoaded(WorkerId),
}

impl Choice {
    /// The chosen worker and the decision branch it is counted under.
    pub(super) fn worker_and_branch(&self) -> (WorkerId, &'static str) {
        match self {
            Choice::Hit(worker) => (*worker, PREFIX_HIT),
            Choice::Imbalanced(worker) => (*worker, IMBALANCED),
            Choice::Migrate { worker, .. } => (*worker, MIGRATED),
            Choice::Placed(worker, kind) => (*worker, placement_branch(*kind)),
            Choice::Escaped(worker) => (*worker, LOAD_ESCAPE),
            Choice::Relieved(worker) => (*worker, BUSY_ESCAPE),
            Choice::LeastLoaded(worker) => (*worker, LEAST_LOADED),
        }
    }
}

impl Choice {
    /// The deviation from hash placement to announce, if this choice is one (`sticky`: a
    /// later turn of a conversation).
    pub(super) fn into_deviation(self, sticky: bool) -> Option<Deviation> {
        match self {
            Choice::Migrate {
                matched, displaced, ..
            } => Some(Deviation::Migration { matched, displaced }),
            // An escape moves the conversation like a load move: replicas that share
            // affinity events follow it there even once the old worker's queue is gone.
            Choice::Placed(_, PlacementKind::LoadMove | PlacementKind::GroupSpill)
            | Choice::Escaped(_)
            | Choice::Relieved(_) => Some(Deviation::LoadMove),
            Choice::Placed(_, PlacementKind::Group | PlacementKind::GroupBalanced) if !sticky => {
                Some(Deviation::GroupPlacement)
            }
            _ => None,
        }
    }
}

fn placement_branch(kind: PlacementKind) -> &'static str {
    match kind {
        PlacementKind::Override => PLACEMENT_OVERRIDE,
        PlacementKind::Hash => HASH_PLACEMENT,
        PlacementKind::HashFallback => HASH_FALLBACK,
        PlacementKind::LoadMove => LOAD_MOVE,
        PlacementKind::Group => PROMPT_GROUP,
        PlacementKind::GroupSpill => PROMPT_GROUP_SPILL,
        PlacementKind::GroupBalanced => PROMPT_GROUP_BALANCED,
        PlacementKind::GroupBeforeChange => PROMPT_GROUP_BEFORE_CHANGE,
    }
}
