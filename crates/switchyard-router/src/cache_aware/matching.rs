//! Reading a tree lookup: which cached prefix is this request's affinity, which holder to
//! prefer, and what to report as the best cache match.

use super::tree::{Holder, Lookup};
use crate::load::CandidateView;
use crate::policy::PrefixMatch;
use std::cmp::Reverse;
use switchyard_core::WorkerId;

/// Which cached prefixes tie a request to the worker holding them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Affinity {
    /// Any shared prefix: without an identity, the prompt text is all we know.
    SharedPrefix,
    /// Only a prefix the prompt continues (an earlier whole prompt, e.g. the previous turn of
    /// the conversation). With a session or user key a shared beginning, such as the system
    /// prompt every session of an application starts with, says nothing about where the
    /// session lives; following it would pile every session onto the first worker that cached
    /// the system prompt.
    Continuation,
}

impl Affinity {
    /// The longest prefix of this kind held by a worker `held` accepts (length, all holders).
    pub(super) fn longest<'l>(
        self,
        lookup: &'l Lookup<'_, '_>,
        held: impl FnMut(WorkerId) -> bool,
    ) -> Option<(usize, &'l [Holder])> {
        match self {
            Self::SharedPrefix => lookup.longest_held_by(held),
            Self::Continuation => lookup.longest_continuation_held_by(held),
        }
    }
}

/// Among holders that are candidates: fewest in flight, then the warmest cache, then lowest id.
pub(super) fn least_busy_holder(holders: &[Holder], view: &CandidateView) -> Option<WorkerId> {
    holders
        .iter()
        .filter_map(|h| Some((view.in_flight(h.worker)?, Reverse(h.last_used), h.worker)))
        .min()
        .map(|(_, _, worker)| worker)
}

/// The holder most likely to still have the prefix cached: most recently used, then lowest id.
fn most_recent_holder(holders: &[Holder]) -> Option<WorkerId> {
    holders
        .iter()
        .max_by_key(|h| (h.last_used, Reverse(h.worker)))
        .map(|h| h.worker)
}

/// The longest cached prefix whatever the affinity rule, for the logical / physical / virtual
/// hit counts: `chosen` is reported as the holder when it holds that prefix (a physical hit),
/// else the least busy candidate holding it, else the most recent filtered holder.
pub(super) fn best_cache_match(
    lookup: &Lookup<'_, '_>,
    view: &CandidateView,
    chosen: WorkerId,
    prompt_len: usize,
) -> Option<PrefixMatch> {
    let (len, holders) = lookup.longest()?;
    let (holder, holder_is_candidate) = if holders.iter().any(|h| h.worker == chosen) {
        (chosen, true)
    } else if let Some(holder) = least_busy_holder(holders, view) {
        (holder, true)
    } else {
        (most_recent_holder(holders)?, false)
    };
    Some(PrefixMatch {
        holder,
        matched_ratio: len as f32 / prompt_len as f32,
        holder_is_candidate,
    })
}
