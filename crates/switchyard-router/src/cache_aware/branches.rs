//! The decision branches of the policy, as counted in
//! `switchyard_routing_decisions_total{policy="cache_aware",branch}`.

/// A candidate holds the longest affinity prefix, and it covers enough of the prompt.
pub(super) const PREFIX_HIT: &str = "prefix_hit";
/// The longest affinity prefix's holders were all filtered: affinity moved to another worker.
pub(super) const MIGRATED: &str = "migrated";
/// No affinity (or not enough): the routing key's ring owner.
pub(super) const HASH_PLACEMENT: &str = "hash_placement";
/// Like `hash_placement`, but the owner was filtered and the next worker clockwise took it.
pub(super) const HASH_FALLBACK: &str = "hash_fallback";
/// Placement followed a move some replica made earlier for the same routing key.
pub(super) const PLACEMENT_OVERRIDE: &str = "placement_override";
/// Placement skipped the owner for the load bound (broadcast as a `LoadMove`).
pub(super) const LOAD_MOVE: &str = "load_move";
/// A later turn left its conversation's worker, whose engine reports a queue.
pub(super) const LOAD_ESCAPE: &str = "load_escape";
/// A later turn left its conversation's worker, which carries a full batch or more.
pub(super) const BUSY_ESCAPE: &str = "busy_escape";
/// A chat turn placed on its conversation's worker within its system prompt's group.
pub(super) const PROMPT_GROUP: &str = "prompt_group";
/// A first turn whose group worker was over the bound: the next worker of its system prompt's
/// ranking took it (broadcast as a `LoadMove`).
pub(super) const PROMPT_GROUP_SPILL: &str = "prompt_group_spill";
/// A first turn given the group worker it drew second, which wrote less to its cache lately
/// (a replica that routes its conversations whole; broadcast like `prompt_group`).
pub(super) const PROMPT_GROUP_BALANCED: &str = "prompt_group_balanced";
/// A later turn of a conversation opened before the last worker join or leave, placed on the
/// worker the plan of that time drew for it (replicas that share no placements).
pub(super) const PROMPT_GROUP_BEFORE_CHANGE: &str = "prompt_group_before_change";
/// The fleet's in-flight spread is too large: least loaded, cache ignored.
pub(super) const IMBALANCED: &str = "imbalanced";
/// Short prompt, no routing key, or no candidate on the ring: least loaded.
pub(super) const LEAST_LOADED: &str = "least_loaded";
pub(super) const BRANCHES: &[&str] = &[
    PREFIX_HIT,
    MIGRATED,
    HASH_PLACEMENT,
    HASH_FALLBACK,
    PLACEMENT_OVERRIDE,
    LOAD_MOVE,
    LOAD_ESCAPE,
    BUSY_ESCAPE,
    PROMPT_GROUP,
    PROMPT_GROUP_SPILL,
    PROMPT_GROUP_BALANCED,
    PROMPT_GROUP_BEFORE_CHANGE,
    IMBALANCED,
    LEAST_LOADED,
];
