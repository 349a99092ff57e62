//! The time a leader stamps its entries with (ledger time: lease and override expiry, budget
//! periods). A wall clock alone is fragile: a leader whose clock steps back (or that is
//! elected with a slow clock) would freeze ledger time, since the state machine never lets it
//! go backwards, and every expiry would be late by the skew. So a leader reads its wall clock
//! once per term, at its first stamp, never earlier than the ledger time it has applied, and
//! from there advances by its monotonic clock, which skew does not move. A leader whose clock
//! is ahead moves ledger time forward (expiries come early: the safe side); one whose clock
//! is behind changes nothing.

use parking_lot::Mutex;
use std::time::Instant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Anchor {
    term: u64,
    ts_ms: u64,
    at: Instant,
}

/// One leader's source of entry timestamps (reset on every new term).
#[derive(Debug, Default)]
pub(crate) struct LeaderClock {
    anchor: Mutex<Option<Anchor>>,
}

impl LeaderClock {
    /// The stamp for an entry proposed now in `term`. `applied_ms` is the ledger time this
    /// node has applied; `wall_ms` its wall clock.
    pub fn stamp(&self, term: u64, applied_ms: u64, wall_ms: u64, now: Instant) -> u64 {
        let mut anchor = self.anchor.lock();
        match *anchor {
            Some(a) if a.term == term => {
                let elapsed = now.saturating_duration_since(a.at).as_millis();
                a.ts_ms
                    .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
                    .max(applied_ms)
            }
            _ => {
                let ts_ms = wall_ms.max(applied_ms);
                *anchor = Some(Anchor {
                    term,
                    ts_ms,
                    at: now,
                });
                ts_ms
            }
        }
    }

    /// Ledger time as this leader would stamp it now, without starting a term (for the
    /// quiet-leader tick): the wall clock until the first stamp of the term.
    pub fn peek(&self, term: u64, applied_ms: u64, wall_ms: u64, now: Instant) -> u64 {
        match *self.anchor.lock() {
            Some(a) if a.term == term => {
                let elapsed = now.saturating_duration_since(a.at).as_millis();
                a.ts_ms
                    .saturating_add(u64::try_from(elapsed).unwrap_or(u64::MAX))
                    .max(applied_ms)
            }
            _ => wall_ms.max(applied_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const T0: u64 = 1_000_000;

    #[test]
    fn within_a_term_the_stamp_follows_the_monotonic_clock_not_a_skewed_wall() {
        let clock = LeaderClock::default();
        let start = Instant::now();
        assert_eq!(clock.stamp(3, T0 - 500, T0, start), T0);
        // The wall clock steps back 25 s, then forward 19 s: neither moves the stamps.
        let later = start + Duration::from_secs(2);
        assert_eq!(clock.stamp(3, T0, T0 + 2_000 - 25_000, later), T0 + 2_000);
        let later = start + Duration::from_secs(3);
        assert_eq!(clock.stamp(3, T0, T0 + 3_000 + 19_000, later), T0 + 3_000);
    }

    #[test]
    fn a_new_term_reads_the_wall_clock_but_never_goes_below_applied_ledger_time() {
        let clock = LeaderClock::default();
        let start = Instant::now();
        clock.stamp(3, 0, T0, start);
        // Elected with a clock 25 s behind: ledger time carries on from what was applied.
        let behind = clock.stamp(4, T0 + 1_000, T0 + 1_000 - 25_000, start);
        assert_eq!(behind, T0 + 1_000);
        let later = start + Duration::from_millis(1_500);
        assert_eq!(clock.stamp(4, T0 + 1_000, 0, later), T0 + 2_500);
        // Elected with a clock ahead: ledger time jumps forward (expiries come early).
        assert_eq!(clock.stamp(5, T0 + 2_500, T0 + 40_000, later), T0 + 40_000);
    }

    #[test]
    fn peek_does_not_start_a_term() {
        let clock = LeaderClock::default();
        let start = Instant::now();
        assert_eq!(clock.peek(1, T0, T0 + 5, start), T0 + 5);
        assert_eq!(clock.stamp(1, T0, T0 + 9, start), T0 + 9);
        let later = start + Duration::from_millis(100);
        assert_eq!(clock.peek(1, T0, 0, later), T0 + 109);
    }
}
