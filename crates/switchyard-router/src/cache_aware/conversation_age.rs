//! When each conversation this replica met was opened, as far as it can tell.
//!
//! A worker joining or leaving re-plans the system prompts' groups, and the new plan draws
//! some conversations to other workers that stayed. Replicas that share placements send a
//! conversation's later turns where its opening went, so only conversations opened after the
//! change take the new plan; replicas fed at random that share nothing place an unseen later
//! turn by the plan, so they would move those conversations in progress. They keep the old
//! plan for the conversations opened under it instead (`prompt_group::GroupPlan`), which
//! needs each conversation's opening time. No request carries it, but every request carries
//! its whole history: a turn with k user messages was opened about k − 1 turn intervals ago,
//! and this replica measures the fleet's turn interval from the conversations it meets more
//! than once (the turns between two of its meetings went through other replicas). A
//! conversation met before the change was certainly opened before it. The same record says
//! how many of a conversation's turns this replica has counted (`group_shares`).

use crate::hash::PrehashedKey;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::time::Duration;

/// Weight of each new interval measured: a few dozen meetings make the estimate, and a
/// workload whose pace changes is followed within a few hundred.
const INTERVAL_WEIGHT: f64 = 1.0 / 32.0;

#[derive(Clone, Copy, Debug)]
struct Met {
    /// The user turns its history showed when this replica last met it.
    turn: u32,
    at: Duration,
    /// Its estimated opening time.
    opened: Duration,
}

#[derive(Debug)]
pub(super) struct ConversationAges {
    met: HashMap<u64, Met, BuildHasherDefault<PrehashedKey>>,
    /// Exactly the keys of `met`, oldest first.
    order: VecDeque<u64>,
    capacity: usize,
    /// The fleet's mean time between two turns of a conversation, in seconds, once measured.
    turn_interval_secs: Option<f64>,
}

impl ConversationAges {
    pub(super) fn new(capacity: usize) -> Self {
        Self {
            met: HashMap::default(),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            turn_interval_secs: None,
        }
    }

    /// This replica met `conversation` at its user turn `turn` (1 for the opening) at `now`.
    /// Returns the most user turns it had seen that conversation at before (None for one it
    /// meets for the first time, as far as it remembers).
    pub(super) fn observe(&mut self, conversation: u64, turn: u32, now: Duration) -> Option<u32> {
        if let Some(met) = self.met.get_mut(&conversation) {
            let before = met.turn;
            if turn > met.turn {
                if now > met.at {
                    let interval = (now - met.at).as_secs_f64() / f64::from(turn - met.turn);
                    self.turn_interval_secs = Some(match self.turn_interval_secs {
                        Some(mean) => mean + INTERVAL_WEIGHT * (interval - mean),
                        None => interval,
                    });
                }
                met.turn = turn;
                met.at = now;
            }
            return Some(before);
        }
        let turns_before = f64::from(turn.saturating_sub(1));
        let age = self
            .turn_interval_secs
            .map_or(0.0, |interval| interval * turns_before);
        let opened = now.saturating_sub(Duration::try_from_secs_f64(age).unwrap_or_default());
        self.met.insert(
            conversation,
            Met {
                turn,
                at: now,
                opened,
            },
        );
        self.order.push_back(conversation);
        while self.order.len() > self.capacity {
            if let Some(oldest) = self.order.pop_front() {
                self.met.remove(&oldest);
            }
        }
        None
    }

    /// Conversations remembered.
    pub(super) fn len(&self) -> usize {
        self.met.len()
    }

    /// Whether `conversation` was opened before `instant`, as far as this replica can tell
    /// (false for one it does not remember).
    pub(super) fn opened_before(&self, conversation: u64, instant: Duration) -> bool {
        self.met
            .get(&conversation)
            .is_some_and(|met| met.opened < instant)
    }

    /// The measured mean time between two turns of a conversation.
    #[cfg(test)]
    fn turn_interval(&self) -> Option<Duration> {
        self.turn_interval_secs
            .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[test]
    fn the_turn_interval_comes_from_conversations_met_twice() {
        let mut ages = ConversationAges::new(16);
        assert_eq!(
            ages.observe(1, 2, secs(10.0)),
            None,
            "met for the first time"
        );
        assert_eq!(ages.turn_interval(), None, "one meeting measures nothing");
        // Four turns in eight seconds went by, three of them through other replicas.
        assert_eq!(ages.observe(1, 6, secs(18.0)), Some(2));
        assert_eq!(ages.turn_interval(), Some(secs(2.0)));
        // A retry of the same turn, or an older one arriving late, measures nothing.
        assert_eq!(ages.observe(1, 6, secs(19.0)), Some(6));
        assert_eq!(ages.observe(1, 5, secs(20.0)), Some(6));
        assert_eq!(ages.turn_interval(), Some(secs(2.0)));
    }

    #[test]
    fn a_conversation_met_late_was_opened_its_turns_ago() {
        let mut ages = ConversationAges::new(16);
        ages.observe(1, 1, secs(0.0));
        ages.observe(1, 3, secs(4.0)); // 2 s per turn
        // First met at its fifth turn at 100 s: opened about 8 s earlier.
        ages.observe(2, 5, secs(100.0));
        assert!(ages.opened_before(2, secs(93.0)));
        assert!(!ages.opened_before(2, secs(91.0)));
        // Met again later, it keeps the opening time it was given.
        ages.observe(2, 9, secs(108.0));
        assert!(ages.opened_before(2, secs(93.0)));
        assert!(!ages.opened_before(2, secs(91.0)));
    }

    #[test]
    fn without_a_measured_interval_a_conversation_counts_as_opened_when_met() {
        let mut ages = ConversationAges::new(16);
        ages.observe(7, 9, secs(50.0));
        assert!(!ages.opened_before(7, secs(50.0)));
        assert!(ages.opened_before(7, secs(50.5)));
        assert!(
            !ages.opened_before(8, secs(1000.0)),
            "never met: not known to be old"
        );
    }

    #[test]
    fn the_oldest_conversations_are_forgotten_past_the_capacity() {
        let mut ages = ConversationAges::new(2);
        ages.observe(1, 1, secs(0.0));
        ages.observe(2, 1, secs(1.0));
        ages.observe(3, 1, secs(2.0));
        assert!(!ages.opened_before(1, secs(10.0)));
        assert!(ages.opened_before(2, secs(10.0)));
        assert!(ages.opened_before(3, secs(10.0)));
    }
}
