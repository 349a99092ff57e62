//! How many replicas share this one's placements, as their affinity events show.
//!
//! Replicas that form one group replicate every placement they announce, and every replica
//! applies every record, its own included. Fed at random, each replica announces its share of
//! the fleet's placements, so the fresh records applied here against this replica's own
//! announcements over the same time say how many replicas are placing: about N for N
//! replicas, 1 for one replica alone, and nothing (so 1) where events are not shared. Where
//! others are placing too, a conversation's later turns follow its first wherever it went, so
//! a first turn may even out its group's cache writes and a replica may plan its prompts'
//! groups from its first requests (see `GroupPlan::refresh`).

use super::decayed::DecayedRatio;
use std::time::Duration;

/// Half-life of both counts: long enough for a few dozen announcements per replica at a
/// modest rate, short enough to follow replicas joining or leaving within a minute.
const HALF_LIFE: Duration = Duration::from_secs(30);
/// Records older than this when applied (a log replayed to a lagging replica, or a clock far
/// off) say nothing about who is placing now.
const FRESH: Duration = Duration::from_secs(10);
/// Below this many (decayed) own announcements the ratio is noise: count as alone.
const MIN_ANNOUNCED: f64 = 8.0;
/// The most replicas the estimate claims (a bound on what a noisy ratio can claim).
const MAX_REPLICAS: f64 = 64.0;
/// Halfway to a second replica: others' records are arriving, not just this one's own.
const SHARED_FROM: f64 = 1.5;

#[derive(Debug)]
pub(super) struct FleetShare {
    /// Fresh records applied (every replica's, this one's included) per own announcement.
    applied_per_own: DecayedRatio,
    /// When this replica started: records announced before it (the log a restarted replica
    /// catches up on) pair with none of its own announcements.
    started: Duration,
}

impl FleetShare {
    pub(super) fn starting_at(now: Duration) -> Self {
        Self {
            applied_per_own: DecayedRatio::new(HALF_LIFE, now),
            started: now,
        }
    }

    /// This replica announced a placement at `now`.
    pub(super) fn announced(&mut self, now: Duration) {
        self.applied_per_own.add_base(1.0, now);
    }

    /// A record announced at `announced_at` (by any replica) was applied here at `now`.
    pub(super) fn applied(&mut self, now: Duration, announced_at: Duration) {
        if self.is_current(now, announced_at) {
            self.applied_per_own.add_counted(1.0, now);
        }
    }

    /// Whether a record announced at `announced_at` tells of placing now: fresh, and not from
    /// the log a restarted replica catches up on.
    pub(super) fn is_current(&self, now: Duration, announced_at: Duration) -> bool {
        let age = now.checked_sub(announced_at).unwrap_or_default();
        age <= FRESH && announced_at >= self.started
    }

    /// Whether other replicas apply this one's placements, as it applies theirs (they share
    /// one ledger): a first turn placed here is followed by its later turns on any of them.
    pub(super) fn shares_placements(&self, now: Duration) -> bool {
        self.replicas(now) >= SHARED_FROM
    }

    /// Replicas placing alongside this one, itself included (≥ 1).
    pub(super) fn replicas(&self, now: Duration) -> f64 {
        if self.applied_per_own.base(now) < MIN_ANNOUNCED {
            return 1.0;
        }
        self.applied_per_own
            .ratio()
            .map_or(1.0, |ratio| ratio.clamp(1.0, MAX_REPLICAS))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// `replicas` replicas each announcing once per second, all records applied here.
    fn fed(replicas: u32, seconds: u32) -> FleetShare {
        let mut share = FleetShare::starting_at(Duration::ZERO);
        for s in 0..seconds {
            let now = secs(f64::from(s));
            share.announced(now);
            for _ in 0..replicas {
                share.applied(now, now);
            }
        }
        share
    }

    #[test]
    fn the_ratio_of_applied_records_to_own_announcements_counts_the_replicas() {
        let now = secs(60.0);
        assert!((fed(5, 60).replicas(now) - 5.0).abs() < 1e-9);
        assert!((fed(3, 60).replicas(now) - 3.0).abs() < 1e-9);
        // Alone in a group: only its own records come back.
        assert!((fed(1, 60).replicas(now) - 1.0).abs() < 1e-9);
        // Events not shared at all: nothing comes back, and that is being alone too.
        assert_eq!(fed(0, 60).replicas(now), 1.0);
    }

    #[test]
    fn placements_are_shared_once_other_replicas_records_arrive() {
        let now = secs(60.0);
        assert!(fed(2, 60).shares_placements(now));
        assert!(fed(5, 60).shares_placements(now));
        assert!(!fed(1, 60).shares_placements(now), "alone in its group");
        assert!(!fed(0, 60).shares_placements(now), "events not shared");
        assert!(!fed(5, 5).shares_placements(secs(5.0)), "too few to judge");
    }

    #[test]
    fn too_few_announcements_or_stale_records_count_as_alone() {
        // Five announcements, every one echoed by five replicas: still too few to judge.
        assert_eq!(fed(5, 5).replicas(secs(5.0)), 1.0);
        // Once enough were announced, a long silence decays them below the minimum again.
        let share = fed(5, 60);
        assert!(share.replicas(secs(60.0)) > 4.9);
        assert_eq!(share.replicas(secs(600.0)), 1.0);
        // A log replayed on restart: old records change nothing.
        let mut share = fed(1, 60);
        for _ in 0..1000 {
            share.applied(secs(60.0), secs(1.0));
        }
        assert!((share.replicas(secs(60.0)) - 1.0).abs() < 1e-9);
        // A replica restarted at 100 s catches up on the records of the seconds before it:
        // fresh, but none of them answers one of its own announcements.
        let mut share = FleetShare::starting_at(secs(100.0));
        for _ in 0..200 {
            share.applied(secs(100.5), secs(95.0));
        }
        for s in 100..120 {
            let now = secs(f64::from(s));
            share.announced(now);
            for _ in 0..3 {
                share.applied(now, now);
            }
        }
        assert!((share.replicas(secs(120.0)) - 3.0).abs() < 1e-9);
    }

    #[test]
    fn the_estimate_follows_replicas_leaving_and_is_bounded() {
        // Five replicas for a minute, then this one alone in the group for two.
        let mut share = fed(5, 60);
        for s in 60..180 {
            let now = secs(f64::from(s));
            share.announced(now);
            share.applied(now, now);
        }
        let left = share.replicas(secs(180.0));
        assert!((1.0..1.3).contains(&left), "{left}");
        // Far more records than announcements (a burst of others' moves) stays bounded.
        let mut share = fed(1, 20);
        for _ in 0..100_000 {
            share.applied(secs(20.0), secs(20.0));
        }
        assert_eq!(share.replicas(secs(20.0)), MAX_REPLICAS);
        // A clock that went back neither panics nor decays.
        let share = fed(5, 60);
        assert!((share.replicas(secs(1.0)) - 5.0).abs() < 1e-9);
    }
}
