//! Placing a conversation near its system prompt.
//!
//! Conversations of one application open with the same long system prompt. Spread evenly by
//! conversation, every worker ends up caching a copy of every popular system prompt, and at a
//! working set close to the fleet's KV that duplicated prefix evicts conversation tails,
//! which cost more to recompute. Kept on one worker, a popular prompt's conversations pile up
//! there. So each system prompt gets a small group of workers, as many as its share of the
//! traffic needs: the workers ranked first for the prompt by rendezvous hashing (by worker
//! name, so every replica ranks alike), `⌈share × workers × spread⌉` of them. Within the group
//! a conversation takes the worker ranked first for the conversation (rendezvous again), so
//! every replica places it alike, its later turns find it from the request alone, and a
//! group that gains or loses a worker moves only the conversations that worker takes or had.
//! Only a first turn looks at load: past a bound it walks on down the prompt's ranking.

use super::group_shares::GroupShares;
use super::plan_churn;
use super::slot_draw::{Plans, Slot, drawn, higher_first, score};
use crate::hash::stable_hash_seeded;
use crate::load::CandidateLoads;
use crate::ring::Ring;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use switchyard_core::WorkerId;

/// How often the system prompts' worker groups are re-planned from their traffic shares:
/// rarely enough that a conversation's turns meet the same plan, often enough to follow a
/// prompt whose traffic grows.
pub(super) const GROUP_PLAN_EVERY: Duration = Duration::from_secs(1);

/// Where a conversation's turn goes by its system prompt's group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum GroupPlacement {
    /// The group's worker for this conversation.
    Preferred,
    /// The preferred worker was over the bound (a first turn): another group worker, or the
    /// next worker in the prompt's ranking. A deviation to announce.
    Spilled,
    /// A first turn given the group worker it drew second, which wrote less to its cache.
    Balanced,
}

/// Each tracked system prompt's workers and the part of its traffic each takes, in units of a
/// quarter worker: the prompts, least busy first, fill the workers of their own ranking up
/// to `factor` × a worker's even share each (water-filling), so a prompt gets as few workers
/// as its share needs and the workers end up evenly loaded. Least busy first because a busy
/// prompt whose share moves then changes only its own last slot, where the other order would
/// push the small prompts after it onto other workers, all of their conversations at once.
/// Every replica builds the plan from its own share estimates, which agree but for noise, so
/// the plan follows the shares continuously, without rounding: a conversation draws its
/// worker by weighted rendezvous, which moves only the conversations a weight change must
/// move, so replicas whose estimates differ a little disagree on a little of the traffic.
/// Rounding to whole units (with hysteresis) turned that small difference into a whole
/// unit's worth of disagreement for every prompt near a rounding boundary, and kept it: two
/// replicas that had rounded differently once went on disagreeing while their estimates
/// agreed. Only slivers are avoided: a prompt's remainder below `MIN_SLOT_UNITS` joins its
/// last slot rather than take another worker (whose copy of the prompt would cost more KV
/// than that traffic saves), and a worker with less room than that is passed over.
#[derive(Debug, Default)]
pub(super) struct GroupPlan {
    ring: Option<Arc<Ring>>,
    built_at: Option<Duration>,
    by_group: Plans,
    /// Capacity left per ring member once the planned prompts took theirs.
    spare: Vec<f64>,
    /// Of the planned prompts' traffic, the share whose drawn worker the last re-plan
    /// changed, and the share the last re-plan on a ring change moved between workers on
    /// both rings (`plan_churn`).
    moved_share: f64,
    moved_between_stayers_on_ring_change: f64,
    before_change: Option<PlanBeforeChange>,
}

/// The plan in force until the last ring change, for the conversations opened under it.
#[derive(Debug)]
struct PlanBeforeChange {
    ring: Arc<Ring>,
    by_group: Plans,
    changed_at: Duration,
}

impl GroupPlan {
    /// Rebuilds the plan when the ring changed or `every` passed since the last build, once
    /// this replica has met `min_conversations` conversations: until then the plan stays
    /// empty and every prompt takes the first worker of its ranking, as on every other
    /// replica. Shares estimated from the first few conversations differ from replica to
    /// replica and from the shares a moment later, and where a conversation's later turns do
    /// not follow its opening (replicas fed at random that do not share placements), those
    /// of a conversation opened on such a plan go elsewhere on the replicas that did not open
    /// it, and back on the one that did.
    pub(super) fn refresh(
        &mut self,
        ring: &Arc<Ring>,
        shares: &GroupShares,
        factor: f64,
        now: Duration,
        every: Duration,
        min_conversations: usize,
    ) {
        let same_ring = self.ring.as_ref().is_some_and(|old| Arc::ptr_eq(old, ring));
        let fresh = self
            .built_at
            .is_some_and(|at| now.saturating_sub(at) < every && now >= at);
        if same_ring && fresh {
            return;
        }
        let members = ring.members().len();
        let capacity = (factor * UNITS_PER_WORKER).max(1.0);
        let previous = std::mem::take(&mut self.by_group);
        if shares.conversations_met() < min_conversations {
            // Not built (the next request looks again), so no prompt is planned and none
            // finds a worker with spare capacity: each takes its ranking's first.
            self.spare.clear();
            return;
        }
        self.spare.clear();
        self.spare.resize(members, capacity);
        let units_of = |group: u64| shares.share(group) * members as f64 * UNITS_PER_WORKER;
        let mut prompts: Vec<(f64, u64)> = shares
            .groups()
            .map(|group| (units_of(group), group))
            .collect();
        // The busiest are planned; rarer ones take one worker with room (`slots`).
        prompts.sort_unstable_by(higher_first);
        prompts.truncate(MAX_PLANNED_PROMPTS);
        prompts.reverse();
        for (units, group) in prompts {
            let ranked = ranking(ring, group);
            let slots = self.fill(&ranked, units);
            self.by_group.insert(group, slots);
        }
        if let Some(old) = self
            .ring
            .clone()
            .filter(|_| !same_ring && !previous.is_empty())
        {
            self.before_change = Some(PlanBeforeChange {
                ring: old,
                by_group: previous.clone(),
                changed_at: now,
            });
        }
        if let Some(old) = self.ring.clone() {
            let samples = if same_ring {
                plan_churn::SAMPLES_PER_PROMPT
            } else {
                plan_churn::SAMPLES_ON_RING_CHANGE
            };
            let after = (ring.as_ref(), &self.by_group);
            if let Some(churn) = plan_churn::churn((&old, &previous), after, shares, samples) {
                self.moved_share = churn.moved;
                if !same_ring {
                    self.moved_between_stayers_on_ring_change = churn.between_stayers;
                }
            }
        }
        self.ring = Some(Arc::clone(ring));
        self.built_at = Some(now);
        if tracing::enabled!(tracing::Level::DEBUG) {
            tracing::debug!(plan = %self.describe(ring, shares), "prompt group plan rebuilt");
        }
    }

    /// Of the planned prompts' traffic, the share whose drawn worker the last re-plan changed,
    /// and the share the last re-plan on a ring change moved between workers on both rings,
    /// beyond what the change forced (0 before there was one).
    pub(super) fn moved_shares(&self) -> (f64, f64) {
        (self.moved_share, self.moved_between_stayers_on_ring_change)
    }

    /// For a later turn of conversation `conversation` of system prompt `group`: the worker
    /// the plan before the last ring change drew for it, if that change was less than
    /// `PLAN_BEFORE_CHANGE_KEPT` ago and the conversation was opened before it
    /// (`opened_before`). Replicas that share placements send such a conversation where its
    /// opening went; replicas that share nothing send it where the plan it opened under did,
    /// so the re-plan moves none of the conversations in progress but the departed worker's.
    /// The caller checks that the worker is still a candidate.
    pub(super) fn drawn_before_change(
        &self,
        group: u64,
        conversation: u64,
        now: Duration,
        opened_before: impl FnOnce(Duration) -> bool,
    ) -> Option<WorkerId> {
        let before = self.before_change.as_ref()?;
        if now.saturating_sub(before.changed_at) > PLAN_BEFORE_CHANGE_KEPT {
            return None;
        }
        let slots = before.by_group.get(&group)?;
        if !opened_before(before.changed_at) {
            return None;
        }
        drawn(&before.ring, slots, conversation)
    }

    /// The plan as `prompt share: worker units, …; …`, busiest prompt first, for the logs:
    /// replicas whose plans differ send a conversation's turns to different workers.
    fn describe(&self, ring: &Ring, shares: &GroupShares) -> String {
        let mut groups: Vec<(&u64, &Vec<Slot>)> = self.by_group.iter().collect();
        groups.sort_unstable_by(|a, b| shares.share(*b.0).total_cmp(&shares.share(*a.0)));
        let mut out = String::new();
        for (group, slots) in groups {
            let _ = write!(out, "{:04x} {:.3}:", group >> 48, shares.share(*group));
            for &(member, units) in slots {
                let name = ring.member(member).map_or("?", |m| &m.name);
                let _ = write!(out, " {name} {units:.2}");
            }
            out.push_str("; ");
        }
        out
    }

    /// Takes `units` of capacity for a prompt ranked `ranked`, in its order: no slot smaller
    /// than `MIN_SLOT_UNITS` (a remainder that small joins the last slot, a worker with less
    /// room is passed over); what the fleet lacks goes to the prompt's first worker.
    fn fill(&mut self, ranked: &[u32], units: f64) -> Vec<Slot> {
        let mut demand = units;
        let mut slots: Vec<Slot> = Vec::new();
        for &member in ranked {
            let Some(spare) = self.spare.get_mut(member as usize) else {
                continue;
            };
            let take = demand.min(*spare);
            if take < MIN_SLOT_UNITS.min(demand) {
                continue;
            }
            *spare -= take;
            demand -= take;
            slots.push((member, take));
            if demand < MIN_SLOT_UNITS {
                if let Some(last) = slots.last_mut() {
                    last.1 += demand;
                }
                demand = 0.0;
                break;
            }
        }
        if demand > 0.0 {
            if let Some(&first) = ranked.first() {
                match slots.iter_mut().find(|slot| slot.0 == first) {
                    Some(slot) => slot.1 += demand,
                    None => slots.push((first, demand)),
                }
            }
        }
        slots
    }

    /// The slots of system prompt `group` ranked `ranking`: its planned ones, or for a prompt
    /// not planned yet the first worker of its ranking with capacity left (else its first).
    pub(super) fn slots(&self, group: u64, ranking: &[u32]) -> Vec<Slot> {
        if let Some(slots) = self.by_group.get(&group).filter(|slots| !slots.is_empty()) {
            return slots.clone();
        }
        let has_spare = |&&member: &&u32| {
            self.spare
                .get(member as usize)
                .is_some_and(|&spare| spare > 0.0)
        };
        let first = ranking.iter().find(has_spare).or(ranking.first());
        first.map(|&member| vec![(member, 1.0)]).unwrap_or_default()
    }
}

/// Conversations a replica meets before it plans, where later turns may not follow their
/// opening (see `GroupPlan::refresh`): enough that the busiest prompts stand out from the
/// rest, few enough that the warm-up ends within the fleet's first second. Until then every
/// prompt takes its ranking's first worker, and where the busiest prompt's first worker is
/// also the first of several smaller prompts (whose share the settled plan leaves there,
/// sending the busiest elsewhere), a fleet that opens many conversations at once sends most
/// of its traffic to that one worker; one of five replicas fed at random took about three
/// seconds to meet 32 conversations, long enough for that worker's queue to make the fleet's
/// slowest turns of the minute. Plans from a few conversations differ more between replicas,
/// which moves a few more later turns.
pub(super) const MIN_PLAN_CONVERSATIONS: usize = 8;
/// How long the plan before a ring change places the conversations opened under it: long
/// against a conversation's lifetime (minutes for an agent). Only those conversations use
/// it, so a replica started after the change, which never had that plan, disagrees with the
/// others about them alone.
const PLAN_BEFORE_CHANGE_KEPT: Duration = Duration::from_secs(600);
/// The plan's unit: a quarter of a worker's even share.
const UNITS_PER_WORKER: f64 = 4.0;
/// The smallest part of a prompt's traffic worth another worker (see `GroupPlan`).
const MIN_SLOT_UNITS: f64 = 0.5;
/// Prompts placed by the plan, busiest first; rarer ones take one worker with room.
const MAX_PLANNED_PROMPTS: usize = 256;

/// The ring's members ranked for system prompt `group` (rendezvous by worker name).
pub(super) fn ranking(ring: &Ring, group: u64) -> Vec<u32> {
    let mut ranked: Vec<(u64, u32)> = (0u32..)
        .zip(ring.members())
        .map(|(index, member)| (stable_hash_seeded(member.name.as_bytes(), group), index))
        .collect();
    ranked.sort_unstable_by(|a, b| b.cmp(a));
    ranked.into_iter().map(|(_, index)| index).collect()
}

/// Where a turn of conversation `conversation` goes among its prompt's `slots` (the prompt
/// ranked `ranking`): the slot it draws by weighted rendezvous, if a candidate and
/// `accepts(member, in_flight)`; else the other candidate slots in its order, then the rest of
/// the prompt's ranking. None if no candidate accepts.
///
/// With `written` (each ring member's recent cache writes, by member index), the slot drawn
/// second takes the turn instead of the first when both accept it and its worker wrote less:
/// a group's conversations then even out what its workers evict, which the draw alone leaves
/// to chance (each conversation is a lump of turns of its own length). Only for a replica
/// whose conversations' later turns follow it wherever it put the first (see `openings`).
pub(super) fn place(
    ring: &Ring,
    loads: &CandidateLoads,
    slots: &[Slot],
    ranking: &[u32],
    conversation: u64,
    accepts: impl Fn(u32, u64) -> bool,
    written: Option<&[f64]>,
) -> Option<(WorkerId, GroupPlacement)> {
    let mut drawn: Vec<(f64, u32, u64)> = slots
        .iter()
        .filter_map(|&(member, weight)| {
            let in_flight = loads.in_flight(member)?;
            let name = ring.member(member)?.name.as_bytes();
            Some((score(name, conversation, weight), member, in_flight))
        })
        .collect();
    drawn.sort_unstable_by(|a, b| higher_first(&(a.0, a.1), &(b.0, b.1)));
    let id = |member: u32| ring.member(member).map(|m| m.id);
    if let (
        Some(written),
        [
            (_, first, first_in_flight),
            (_, second, second_in_flight),
            ..,
        ],
    ) = (written, drawn.as_slice())
    {
        let wrote = |member: u32| written.get(member as usize).copied().unwrap_or(0.0);
        if accepts(*first, *first_in_flight)
            && accepts(*second, *second_in_flight)
            && wrote(*second) < wrote(*first)
        {
            return Some((id(*second)?, GroupPlacement::Balanced));
        }
    }
    let mut in_group = drawn
        .iter()
        .map(|&(_, member, in_flight)| (member, in_flight));
    let outside = ranking
        .iter()
        .filter(|member| !drawn.iter().any(|d| d.1 == **member))
        .filter_map(|&member| Some((member, loads.in_flight(member)?)));
    match in_group.next() {
        Some((member, in_flight)) if accepts(member, in_flight) => {
            Some((id(member)?, GroupPlacement::Preferred))
        }
        // No slot is a candidate: the prompt's ranking, walking past filtered workers.
        None => {
            let mut walk = outside;
            let (first, in_flight) = walk.next()?;
            if accepts(first, in_flight) {
                return Some((id(first)?, GroupPlacement::Preferred));
            }
            let (member, _) = walk.find(|&(m, n)| accepts(m, n))?;
            Some((id(member)?, GroupPlacement::Spilled))
        }
        Some(_) => {
            let (member, _) = in_group.chain(outside).find(|&(m, n)| accepts(m, n))?;
            Some((id(member)?, GroupPlacement::Spilled))
        }
    }
}

#[cfg(test)]
#[path = "prompt_group_plan_tests.rs"]
mod plan_tests;

#[cfg(test)]
#[path = "prompt_group_place_tests.rs"]
mod place_tests;
