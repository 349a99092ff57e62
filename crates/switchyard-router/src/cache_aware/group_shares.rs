//! Each system prompt's share of the fleet's chat turns, as one replica estimates it.
//!
//! Replicas fed at random each see a fraction of the requests, so shares counted from the
//! requests a replica served are noisy estimates that differ between replicas by more than
//! the group plan's rounding unit, and a later turn then meets a different plan on a replica
//! that never saw its conversation. But every turn carries the whole history: a request with
//! k user messages says that its conversation has sent k turns so far, wherever they went.
//! So a replica counts, per conversation it has seen, the turns the history shows beyond
//! those it already counted: the fleet's turns of every conversation it saw at least once.
//! Replicas then differ only by the conversations (and latest turns) one of them has not
//! seen yet, and a replica that just started catches up with the conversations in progress
//! from their first request.

use super::conversation_age::ConversationAges;
use crate::hash::PrehashedKey;
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::time::Duration;

/// Rescale once a fresh request would weigh 2^this (as `recent::RecentLoad`).
const RESCALE_EXPONENT: f64 = 64.0;

/// System prompts whose traffic share is tracked for their group's width; the rarest go first.
const MAX_TRACKED_PROMPTS: usize = 4096;
/// Conversations whose counted turns are remembered; the oldest go first (one seen again
/// after that counts its whole history once more, a brief overestimate of its prompt).
const MAX_TRACKED_CONVERSATIONS: usize = 65_536;
/// Half-life of the system prompts' traffic shares: long against a conversation's lifetime,
/// so the plan its turns meet stays the same, and so replicas' estimates agree.
const GROUP_SHARE_HALF_LIFE: Duration = Duration::from_secs(120);

/// Each system prompt's decayed count of the fleet's turns in the conversations this replica
/// has seen.
#[derive(Debug)]
pub(super) struct GroupShares {
    half_life_secs: f64,
    origin_secs: f64,
    capacity: usize,
    scaled: HashMap<u64, f64, BuildHasherDefault<PrehashedKey>>,
    total: f64,
    /// Per conversation met, the turns counted so far (and when it was opened).
    met: ConversationAges,
}

impl GroupShares {
    pub(super) fn new(half_life: Duration, capacity: usize, conversations: usize) -> Self {
        Self {
            half_life_secs: half_life.as_secs_f64().max(f64::MIN_POSITIVE),
            origin_secs: 0.0,
            capacity: capacity.max(1),
            scaled: HashMap::default(),
            total: 0.0,
            met: ConversationAges::new(conversations),
        }
    }

    /// The policy's: `MAX_TRACKED_PROMPTS`, `MAX_TRACKED_CONVERSATIONS`, `GROUP_SHARE_HALF_LIFE`.
    pub(super) fn with_defaults() -> Self {
        Self::new(
            GROUP_SHARE_HALF_LIFE,
            MAX_TRACKED_PROMPTS,
            MAX_TRACKED_CONVERSATIONS,
        )
    }

    fn weight(&mut self, now: Duration) -> f64 {
        let exponent = ((now.as_secs_f64() - self.origin_secs) / self.half_life_secs).max(0.0);
        if exponent < RESCALE_EXPONENT {
            return exponent.exp2();
        }
        let shrink = (-exponent).exp2();
        self.scaled.retain(|_, count| {
            *count *= shrink;
            *count > 1e-12
        });
        self.total = self.scaled.values().sum();
        self.origin_secs = now.as_secs_f64();
        1.0
    }

    /// Counts the turns of `conversation` (of system prompt `group`) that its history shows
    /// at its turn `turn` (1 for the opening) and this replica has not counted yet. A turn
    /// sent again (a retry) counts nothing. True when this replica meets the conversation for
    /// the first time (as far as it remembers).
    pub(super) fn observe(
        &mut self,
        group: u64,
        conversation: u64,
        turn: u32,
        now: Duration,
    ) -> bool {
        let counted = self.met.observe(conversation, turn, now);
        let new_turns = turn.saturating_sub(counted.unwrap_or(0));
        if new_turns > 0 {
            self.add(group, f64::from(new_turns), now);
        }
        counted.is_none()
    }

    /// Counts one request of system prompt `group` at `now`.
    #[cfg(test)]
    pub(super) fn record(&mut self, group: u64, now: Duration) {
        self.add(group, 1.0, now);
    }

    fn add(&mut self, group: u64, requests: f64, now: Duration) {
        let weight = self.weight(now) * requests;
        *self.scaled.entry(group).or_insert(0.0) += weight;
        self.total += weight;
        if self.scaled.len() > self.capacity {
            // The least used prompt goes: a prompt that rare needs no more than one worker.
            let rarest = self
                .scaled
                .iter()
                .filter(|&(&key, _)| key != group)
                .min_by(|a, b| a.1.total_cmp(b.1))
                .map(|(&key, &count)| (key, count));
            if let Some((key, count)) = rarest {
                self.scaled.remove(&key);
                self.total -= count;
            }
        }
    }

    /// `group`'s share of the recent requests (0 when unseen).
    pub(super) fn share(&self, group: u64) -> f64 {
        if self.total <= 0.0 {
            return 0.0;
        }
        self.scaled
            .get(&group)
            .map_or(0.0, |count| count / self.total)
    }

    /// Conversations this replica has met (as far as it remembers them).
    pub(super) fn conversations_met(&self) -> usize {
        self.met.len()
    }

    /// Whether `conversation` was opened before `instant`, as far as this replica can tell
    /// (`ConversationAges::opened_before`).
    pub(super) fn opened_before(&self, conversation: u64, instant: Duration) -> bool {
        self.met.opened_before(conversation, instant)
    }

    /// The tracked system prompts.
    pub(super) fn groups(&self) -> impl Iterator<Item = u64> + '_ {
        self.scaled.keys().copied()
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.scaled.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_decay_and_the_rarest_prompt_is_forgotten_first() {
        let mut shares = GroupShares::new(Duration::from_secs(1), 2, 16);
        for _ in 0..3 {
            shares.record(1, Duration::ZERO);
        }
        shares.record(2, Duration::ZERO);
        assert!((shares.share(1) - 0.75).abs() < 1e-9);
        // Four half-lives on, prompt 2's fresh requests outweigh prompt 1's old ones.
        for _ in 0..3 {
            shares.record(2, Duration::from_secs(4));
        }
        assert!(shares.share(2) > 0.9, "{}", shares.share(2));
        shares.record(3, Duration::from_secs(4));
        assert_eq!(shares.len(), 2);
        assert_eq!(shares.share(1), 0.0, "the rarest went");
        let total: f64 = [2, 3].iter().map(|&g| shares.share(g)).sum();
        assert!((total - 1.0).abs() < 1e-9);
    }

    #[test]
    fn replicas_that_saw_different_turns_of_the_same_conversations_count_alike() {
        let hour = Duration::from_secs(3600);
        let (mut a, mut b) = (
            GroupShares::new(hour, 16, 64),
            GroupShares::new(hour, 16, 64),
        );
        // Prompt 1: conversations 0..10 of 6 turns; prompt 2: 10..20 of 2 turns. Replica a
        // sees the odd turns and the last, b the even ones (so b never sees an opening).
        let mut per_request = [
            GroupShares::new(hour, 16, 64),
            GroupShares::new(hour, 16, 64),
        ];
        for conversation in 0u64..20 {
            let (group, turns) = if conversation < 10 { (1, 6) } else { (2, 2) };
            for turn in 1..=turns {
                if turn % 2 == 1 || turn == turns {
                    a.observe(group, conversation, turn, Duration::ZERO);
                    per_request[0].record(group, Duration::ZERO);
                }
                if turn % 2 == 0 {
                    b.observe(group, conversation, turn, Duration::ZERO);
                    per_request[1].record(group, Duration::ZERO);
                }
            }
        }
        // Of the fleet's 80 turns, 60 were prompt 1's: both replicas say so, where counting
        // the requests each served says 40 of 60 on one and 30 of 40 on the other.
        for shares in [&a, &b] {
            assert!((shares.share(1) - 0.75).abs() < 1e-9, "{}", shares.share(1));
        }
        assert!((per_request[0].share(1) - 2.0 / 3.0).abs() < 1e-9);
        assert!((per_request[1].share(1) - 0.75).abs() < 1e-9);
        // A retried turn, or an older one arriving late, counts nothing.
        a.observe(1, 0, 5, Duration::ZERO);
        a.observe(1, 0, 6, Duration::ZERO);
        b.observe(1, 0, 3, Duration::ZERO);
        for shares in [&a, &b] {
            assert!((shares.share(1) - 0.75).abs() < 1e-9, "{}", shares.share(1));
        }
    }

    #[test]
    fn a_fresh_replica_catches_up_from_the_histories_of_the_conversations_in_progress() {
        let hour = Duration::from_secs(3600);
        let mut old = GroupShares::new(hour, 16, 4096);
        // Prompt 1's conversations run 8 turns, prompt 2's 2: 80 % of the turns are prompt 1's
        // though half the conversations are prompt 2's.
        for conversation in 0u64..100 {
            let (group, turns) = if conversation % 2 == 0 {
                (1, 8)
            } else {
                (2, 2)
            };
            for turn in 1..=turns {
                old.observe(group, conversation, turn, Duration::ZERO);
            }
        }
        assert!((old.share(1) - 0.8).abs() < 1e-9, "{}", old.share(1));
        // A replica started now sees one request of each of the last 20 conversations, at
        // their last turn: it knows what the one that ran all along knows.
        let mut fresh = GroupShares::new(hour, 16, 4096);
        let mut per_request = GroupShares::new(hour, 16, 4096);
        for conversation in 80u64..100 {
            let (group, turns) = if conversation % 2 == 0 {
                (1, 8)
            } else {
                (2, 2)
            };
            fresh.observe(group, conversation, turns, Duration::ZERO);
            per_request.record(group, Duration::ZERO);
        }
        assert!((fresh.share(1) - 0.8).abs() < 1e-9, "{}", fresh.share(1));
        // Counting requests, it would start from half and halve the popular prompt's workers.
        assert!((per_request.share(1) - 0.5).abs() < 1e-9);
    }

    #[test]
    fn forgotten_conversations_count_their_history_again_and_memory_stays_bounded() {
        let mut shares = GroupShares::new(Duration::from_secs(3600), 16, 2);
        shares.observe(1, 100, 4, Duration::ZERO);
        shares.observe(2, 200, 4, Duration::ZERO);
        shares.observe(2, 300, 4, Duration::ZERO);
        assert_eq!(shares.conversations_met(), 2);
        // Conversation 100 went first: seen again, its four turns count again.
        shares.observe(1, 100, 4, Duration::ZERO);
        assert!((shares.share(1) - 0.5).abs() < 1e-9, "{}", shares.share(1));
        assert!(
            shares.observe(2, 200, 4, Duration::ZERO),
            "200 was forgotten: met anew"
        );
    }
}
