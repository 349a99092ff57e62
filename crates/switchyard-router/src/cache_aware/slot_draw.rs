//! A conversation's draw among its system prompt's slots: weighted rendezvous, so every
//! replica draws alike from the request alone, and a slot's weight change moves only the
//! conversations that change must move. The plan (`prompt_group`), the turn's placement and
//! the churn estimate (`plan_churn`) all order and score slots here, so they cannot drift
//! apart.

use crate::hash::{PrehashedKey, stable_hash_seeded};
use crate::ring::Ring;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use switchyard_core::WorkerId;

/// Each planned system prompt's slots.
pub(super) type Plans = HashMap<u64, Vec<Slot>, BuildHasherDefault<PrehashedKey>>;

/// A worker (ring member index) of a prompt's group and its part of the prompt's traffic.
pub(super) type Slot = (u32, f64);

/// The order of prompts by share and of a conversation's slots by score: the higher figure
/// first, ties to the lower prompt or member, so every replica orders alike.
pub(super) fn higher_first<T: Ord>(a: &(f64, T), b: &(f64, T)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Weighted rendezvous score of `name` for `conversation`: the highest score wins, and each
/// worker wins in proportion to its weight.
pub(super) fn score(name: &[u8], conversation: u64, weight: f64) -> f64 {
    // A uniform draw in (0, 1) from the top 53 bits.
    let draw = ((stable_hash_seeded(name, conversation) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    weight / -draw.ln()
}

/// The worker a conversation at `conversation` draws among `slots` by weighted rendezvous,
/// load aside (as `prompt_group::place` ranks them before any bound).
pub(super) fn drawn(ring: &Ring, slots: &[Slot], conversation: u64) -> Option<WorkerId> {
    let (_, member) = slots
        .iter()
        .filter_map(|&(member, weight)| {
            let name = ring.member(member)?.name.as_bytes();
            Some((score(name, conversation, weight), member))
        })
        .min_by(higher_first)?;
    Some(ring.member(member)?.id)
}
