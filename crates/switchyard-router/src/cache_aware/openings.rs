//! Whether this replica routes the conversations it meets from their opening on.
//!
//! A first turn may take the less busy of the two workers its system prompt's group draws
//! for it only where the conversation's later turns will follow it there. They do on a
//! replica that routes every turn of its conversations (the fleet's only replica, or one
//! behind a balancer that keeps a client on one replica): its own prefix tree sends them
//! after the first. They do not on independent replicas fed at random: the replica that gets
//! the next turn never saw the opening and sends it where the hash says, splitting the
//! conversation. A replica tells the two apart from the conversations it meets: fed every
//! turn, it meets each at its opening; one of N independent replicas fed at random meets about
//! 1/N of them there and the rest at a later turn. A replica that just restarted meets the
//! conversations in progress at later turns, so it keeps to the hash until they are gone.

use super::decayed::DecayedRatio;
use std::time::Duration;

/// Half-life of both counts: long against a conversation's lifetime, so a restarted
/// replica's catch-up weighs a while; short enough to notice a balancer change in minutes.
const HALF_LIFE: Duration = Duration::from_secs(60);
/// Below this many (decayed) conversations met, the share says too little: assume not.
const MIN_MET: f64 = 32.0;
/// The share of conversations met at their opening above which this replica routes its
/// conversations whole. One of two replicas fed at random meets about half there.
const ROUTES_WHOLE: f64 = 0.9;

#[derive(Debug)]
pub(super) struct OpeningsSeen {
    /// Of the conversations met for the first time, the share met at their opening.
    at_opening_per_met: DecayedRatio,
}

impl OpeningsSeen {
    pub(super) fn starting_at(now: Duration) -> Self {
        Self {
            at_opening_per_met: DecayedRatio::new(HALF_LIFE, now),
        }
    }

    /// This replica met a conversation for the first time at `now`, at its opening or not.
    pub(super) fn met(&mut self, at_opening: bool, now: Duration) {
        self.at_opening_per_met.add_base(1.0, now);
        if at_opening {
            self.at_opening_per_met.add_counted(1.0, now);
        }
    }

    /// The share of the conversations met lately that were met at their opening (0 for none).
    pub(super) fn share(&self) -> f64 {
        self.at_opening_per_met.ratio().unwrap_or(0.0)
    }

    /// Whether this replica routes the conversations it meets whole, as far as it can tell.
    pub(super) fn routes_whole(&self, now: Duration) -> bool {
        self.at_opening_per_met.base(now) >= MIN_MET && self.share() >= ROUTES_WHOLE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// Meets one conversation per second from `from` for `seconds`, one in `of` at its opening.
    fn meet(seen: &mut OpeningsSeen, from: u32, seconds: u32, of: u32) {
        for s in from..from + seconds {
            seen.met(s % of == 0, secs(f64::from(s)));
        }
    }

    #[test]
    fn a_replica_fed_every_turn_routes_whole_once_it_met_enough() {
        let mut seen = OpeningsSeen::starting_at(Duration::ZERO);
        meet(&mut seen, 0, 20, 1);
        assert!(
            !seen.routes_whole(secs(20.0)),
            "20 conversations say too little"
        );
        meet(&mut seen, 20, 40, 1);
        assert!((seen.share() - 1.0).abs() < 1e-12);
        assert!(seen.routes_whole(secs(60.0)));
        // Idle for ten minutes: what it met then no longer counts.
        assert!(!seen.routes_whole(secs(660.0)));
    }

    #[test]
    fn one_of_several_independent_replicas_does_not() {
        for replicas in [2, 3, 5] {
            let mut seen = OpeningsSeen::starting_at(Duration::ZERO);
            meet(&mut seen, 0, 300, replicas);
            let expected = 1.0 / f64::from(replicas);
            assert!((seen.share() - expected).abs() < 0.05, "{}", seen.share());
            assert!(!seen.routes_whole(secs(300.0)), "{replicas} replicas");
        }
    }

    #[test]
    fn a_restarted_replica_keeps_to_the_hash_until_the_conversations_in_progress_are_gone() {
        let mut seen = OpeningsSeen::starting_at(Duration::ZERO);
        // The first minute: 60 conversations in progress met at later turns, 60 new ones.
        for s in 0..60 {
            seen.met(false, secs(f64::from(s)));
            seen.met(true, secs(f64::from(s)));
        }
        assert!(!seen.routes_whole(secs(60.0)));
        // Then only new conversations: still not a minute on, whole again three minutes on.
        meet(&mut seen, 60, 60, 1);
        assert!(!seen.routes_whole(secs(120.0)), "{}", seen.share());
        meet(&mut seen, 120, 120, 1);
        assert!(seen.routes_whole(secs(240.0)), "{}", seen.share());
    }

    #[test]
    fn a_clock_that_goes_back_keeps_the_counts() {
        let mut seen = OpeningsSeen::starting_at(secs(100.0));
        meet(&mut seen, 100, 60, 1);
        // Met at 50 s, long before the last count: counted, nothing decayed.
        seen.met(false, secs(50.0));
        assert!(
            seen.share() > 0.95 && seen.share() < 1.0,
            "{}",
            seen.share()
        );
        assert!(seen.routes_whole(secs(160.0)));
    }
}
