//! A later turn's way out of a saturated worker.
//!
//! Later turns follow their conversation whatever this replica's in-flight counts say: those
//! counts are private (each replica sees only its own share of the traffic), and a move made
//! on them sends the turns this replica sees away from the worker the others keep using. But
//! a worker whose engine reports requests waiting for a batch slot makes every turn sent there
//! queue behind them, and that report is the same for every replica scraping the worker. So a
//! later turn leaves such a worker for the first worker clockwise from its conversation's ring
//! position that reports no queue and less load: a function of the conversation and of figures
//! every replica reads alike, so the replicas send the turn to the same place.
//!
//! Gauges scraped a few hundred milliseconds apart miss most bursts: a queue is often gone
//! before the next scrape. The busy escape reads the freshest figure there is, this
//! replica's own in-flight count (exact when one replica feeds the fleet), or the engine's
//! reported running + queued when that is higher (every replica's requests, a scrape ago):
//! at a configured depth (the engine's batch size: the next request would wait for a slot)
//! the turn goes to the first worker clockwise carrying at most half that load. Engines that
//! report gauges show their batch size themselves: the most requests one reported running
//! while others waited is its batch, so where no depth is configured that learned one applies.

use super::choice::Choice;
use super::config::CacheAwareConfig;
use crate::load::CandidateLoads;
use crate::policy::{Candidate, ReportedLoad};
use crate::ring::Ring;
use std::collections::HashMap;
use switchyard_core::WorkerId;

/// Each worker's batch size as its engine showed it: the most requests it reported running
/// while requests waited for a slot (the same figure on every replica scraping it).
#[derive(Debug, Default)]
pub(super) struct LearnedBatches {
    by_worker: HashMap<WorkerId, u64>,
}

impl LearnedBatches {
    pub(super) fn observe(&mut self, candidates: &[Candidate]) {
        for candidate in candidates {
            let Some(load) = candidate.reported else {
                continue;
            };
            if load.queued > 0 && load.running > 0 {
                let batch = self.by_worker.entry(candidate.id).or_insert(0);
                *batch = (*batch).max(load.running);
            }
        }
    }

    /// The busy escape's depth for `worker`: `configured` when set, else its learned batch
    /// if `learn`, else 0 (off).
    pub(super) fn depth(&self, worker: WorkerId, configured: u64, learn: bool) -> u64 {
        match configured {
            0 if learn => self.by_worker.get(&worker).copied().unwrap_or(0),
            depth => depth,
        }
    }

    pub(super) fn forget(&mut self, worker: WorkerId) {
        self.by_worker.remove(&worker);
    }
}

/// The candidates' reported load gauges indexed by ring member (None: not a candidate, or it
/// reports none).
pub(super) struct ReportedLoads {
    by_member: Vec<Option<ReportedLoad>>,
}

impl ReportedLoads {
    pub(super) fn new(ring: &Ring, candidates: &[Candidate]) -> Self {
        let mut by_member = vec![None; ring.members().len()];
        for candidate in candidates {
            if let Some(slot) = ring
                .member_index(candidate.id)
                .and_then(|index| by_member.get_mut(index as usize))
            {
                *slot = candidate.reported;
            }
        }
        Self { by_member }
    }

    fn of(&self, member: u32) -> Option<ReportedLoad> {
        self.by_member.get(member as usize).copied().flatten()
    }

    /// The member's load as best this replica knows it (None: not a candidate): its own
    /// in-flight count, or the engine's reported running + queued when higher.
    fn known_load(&self, loads: &CandidateLoads, member: u32) -> Option<u64> {
        let own = loads.in_flight(member)?;
        let reported = self
            .of(member)
            .map_or(0, |load| load.running.saturating_add(load.queued));
        Some(own.max(reported))
    }
}

/// Where a later turn of the conversation at ring position `key` goes instead of `home`, or
/// None when it stays: `home` reports fewer than `min_queued` requests waiting (0 disables the
/// escape), reports nothing, or no candidate reports an empty queue and less load than it.
fn escape(
    ring: &Ring,
    loads: &CandidateLoads,
    reported: &ReportedLoads,
    key: u64,
    home: WorkerId,
    min_queued: u64,
) -> Option<WorkerId> {
    if min_queued == 0 {
        return None;
    }
    let home_member = ring.member_index(home)?;
    let saturated = reported.of(home_member)?;
    if saturated.queued < min_queued {
        return None;
    }
    let home_load = saturated.running.saturating_add(saturated.queued);
    let placed = loads.place_where(ring, ring.successor(key), |member, _| {
        member != home_member
            && reported.of(member).is_some_and(|load| {
                load.queued == 0 && load.running.saturating_add(load.queued) < home_load
            })
    })?;
    Some(ring.member(placed.member)?.id)
}

/// Where a later turn of the conversation at ring position `key` goes instead of `home`
/// because `home` carries at least `min_load` requests (its known load: this replica's
/// in-flight count or the engine's reported running + queued, whichever is higher), or None
/// when it stays: below that load, `min_load` 0 (off), or no candidate carries at most half
/// of `home`'s load.
fn busy_escape(
    ring: &Ring,
    loads: &CandidateLoads,
    reported: &ReportedLoads,
    key: u64,
    home: WorkerId,
    min_load: u64,
) -> Option<WorkerId> {
    if min_load == 0 {
        return None;
    }
    let home_member = ring.member_index(home)?;
    let home_load = reported.known_load(loads, home_member)?;
    if home_load < min_load {
        return None;
    }
    let placed = loads.place_where(ring, ring.successor(key), |member, _| {
        member != home_member
            && reported
                .known_load(loads, member)
                .is_some_and(|load| load.saturating_mul(2) <= home_load)
    })?;
    Some(ring.member(placed.member)?.id)
}

/// Where a later turn of the conversation at ring position `key` goes instead of `home`, by
/// either escape (the reported queue first), as the choice to make; None when it stays.
pub(super) fn later_turn_escape(
    ring: &Ring,
    loads: &CandidateLoads,
    reported: &ReportedLoads,
    key: u64,
    home: WorkerId,
    config: &CacheAwareConfig,
    batches: &LearnedBatches,
) -> Option<Choice> {
    let queued = config.later_turn_escape_queued;
    if let Some(worker) = escape(ring, loads, reported, key, home, queued) {
        return Some(Choice::Escaped(worker));
    }
    let depth = batches.depth(
        home,
        config.later_turn_escape_in_flight,
        config.later_turn_escape_learned,
    );
    busy_escape(ring, loads, reported, key, home, depth).map(Choice::Relieved)
}
