//! Agentic chat fleets: many multi-turn conversations at once, in groups that share one long
//! system prompt, each turn sending the whole history, and (by default) nothing that names the
//! conversation: no session header, no `user`, as the OpenAI SDKs and most agents send.
//!
//! Answers are stand-ins fixed by the seed (the client writes its own history), so the request
//! sequence depends on the seed alone and an offline replay (`switchyard-sim oracle`) can
//! rebuild exactly the prompts a run sent.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::text::{derive_seed, random_words};
use super::zipf::Zipf;
use super::{ChatMessage, PlannedRequest};

/// Conversations in progress at any time; each request continues one of them at random.
const ACTIVE_CONVERSATIONS: usize = 96;
/// Applications, each with its own system prompt; their popularity is Zipf-skewed, so one
/// system prompt opens about a third of all conversations.
const GROUPS: usize = 8;
const GROUP_ZIPF_EXPONENT: f64 = 1.0;
const SYSTEM_PROMPT_WORDS: usize = 800;
const USER_TURN_WORDS: std::ops::RangeInclusive<usize> = 80..=120;
const ANSWER_WORDS: usize = 100;
/// A conversation ends after a number of turns drawn uniformly from 1..=this.
pub const MAX_AGENTIC_TURNS: usize = 12;

const SYSTEM_PROMPT_STREAM: u64 = 11;
const TURN_STREAM: u64 = 12;
const ANSWER_STREAM: u64 = 13;

/// Whether requests say which conversation they belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// No session header, no `user`: the gateway sees only the messages.
    Anonymous,
    /// The conversation id as `x-session-id` (and nothing as `user`).
    SessionHeader,
}

#[derive(Debug, Default)]
struct Conversation {
    id: u64,
    group: usize,
    length: usize,
    /// User messages sent so far; answers are derived from (seed, id, turn).
    user_turns: Vec<String>,
}

#[derive(Debug)]
pub struct AgenticWorkload {
    seed: u64,
    identity: Identity,
    rng: SmallRng,
    system_prompts: Vec<String>,
    groups: Zipf,
    slots: Vec<Option<Conversation>>,
    next_id: u64,
}

impl AgenticWorkload {
    pub fn new(seed: u64, identity: Identity) -> Self {
        let mut prompt_rng = SmallRng::seed_from_u64(derive_seed(seed, SYSTEM_PROMPT_STREAM));
        let system_prompts = (0..GROUPS)
            .map(|group| {
                format!(
                    "You are agent {group} of a tool-using assistant fleet. {}",
                    random_words(&mut prompt_rng, SYSTEM_PROMPT_WORDS)
                )
            })
            .collect();
        Self {
            seed,
            identity,
            rng: SmallRng::seed_from_u64(derive_seed(seed, TURN_STREAM)),
            system_prompts,
            groups: Zipf::new(GROUPS, GROUP_ZIPF_EXPONENT),
            slots: (0..ACTIVE_CONVERSATIONS).map(|_| None).collect(),
            next_id: 0,
        }
    }

    pub fn next_request(&mut self) -> PlannedRequest {
        let slot = self.rng.random_range(0..self.slots.len());
        let finished = self.slots[slot]
            .as_ref()
            .is_none_or(|conversation| conversation.user_turns.len() >= conversation.length);
        let fresh = finished.then(|| {
            let conversation = Conversation {
                id: self.next_id,
                group: self.groups.sample(&mut self.rng),
                length: self.rng.random_range(1..=MAX_AGENTIC_TURNS),
                user_turns: Vec::new(),
            };
            self.next_id += 1;
            conversation
        });
        let user_words = self.rng.random_range(USER_TURN_WORDS);
        let user_turn = random_words(&mut self.rng, user_words);
        let seed = self.seed;
        let identity = self.identity;
        let entry = &mut self.slots[slot];
        let conversation = match fresh {
            Some(conversation) => entry.insert(conversation),
            // Not taken: an empty slot counts as finished.
            None => entry.get_or_insert_with(Conversation::default),
        };
        conversation.user_turns.push(user_turn);
        let mut messages = Vec::with_capacity(2 * conversation.user_turns.len());
        messages.push(ChatMessage::system(
            self.system_prompts[conversation.group].clone(),
        ));
        let last = conversation.user_turns.len() - 1;
        for (turn, user) in conversation.user_turns.iter().enumerate() {
            messages.push(ChatMessage::user(user.clone()));
            if turn < last {
                messages.push(ChatMessage::assistant(answer(seed, conversation.id, turn)));
            }
        }
        PlannedRequest {
            session_id: match identity {
                Identity::Anonymous => None,
                Identity::SessionHeader => Some(format!("c{}", conversation.id)),
            },
            user: None,
            messages,
            turn: None,
        }
    }
}

/// The assistant's part of turn `turn`, as the client keeps it in its history.
fn answer(seed: u64, conversation: u64, turn: usize) -> String {
    let key = derive_seed(conversation, turn as u64);
    let mut rng = SmallRng::seed_from_u64(derive_seed(derive_seed(seed, ANSWER_STREAM), key));
    random_words(&mut rng, ANSWER_WORDS)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn words(message: &ChatMessage) -> usize {
        message.content.split_whitespace().count()
    }

    #[test]
    fn each_turn_resends_the_whole_history_and_names_nothing() {
        let mut workload = AgenticWorkload::new(4, Identity::Anonymous);
        // Conversations keyed by their opening: system prompt plus first user message.
        let mut history: HashMap<(String, String), Vec<ChatMessage>> = HashMap::new();
        let mut longest = 0;
        for _ in 0..4000 {
            let request = workload.next_request();
            assert_eq!(
                (request.session_id.as_deref(), request.user.as_deref()),
                (None, None)
            );
            let messages = &request.messages;
            assert_eq!(
                messages.len() % 2,
                0,
                "system, then user/assistant pairs ending in user"
            );
            let turns = messages.len() / 2;
            assert!((1..=MAX_AGENTIC_TURNS).contains(&turns));
            longest = longest.max(turns);
            let opening = (messages[0].content.clone(), messages[1].content.clone());
            if let Some(earlier) = history.get(&opening) {
                assert_eq!(
                    &messages[..earlier.len()],
                    &earlier[..],
                    "history never changes"
                );
                assert_eq!(messages.len(), earlier.len() + 2);
            } else {
                assert_eq!(turns, 1, "a new opening is a first turn");
            }
            history.insert(opening, messages.clone());
        }
        assert_eq!(longest, MAX_AGENTIC_TURNS);
    }

    #[test]
    fn turns_are_about_a_hundred_words_under_an_eight_hundred_word_system_prompt() {
        let mut workload = AgenticWorkload::new(2, Identity::Anonymous);
        let mut groups = HashMap::new();
        for _ in 0..2000 {
            let request = workload.next_request();
            let system = &request.messages[0];
            assert!((800..820).contains(&words(system)), "{}", words(system));
            for message in &request.messages[1..] {
                assert!((80..=120).contains(&words(message)), "{}", words(message));
            }
            *groups.entry(system.content.clone()).or_insert(0usize) += 1;
        }
        assert_eq!(groups.len(), GROUPS);
        let busiest = groups.values().max().copied().unwrap_or(0);
        assert!(
            busiest > 2000 / GROUPS * 2,
            "one system prompt is popular: {busiest}"
        );
    }

    #[test]
    fn the_keyed_variant_sends_one_session_per_conversation() {
        let mut anonymous = AgenticWorkload::new(6, Identity::Anonymous);
        let mut keyed = AgenticWorkload::new(6, Identity::SessionHeader);
        let mut sessions: HashMap<String, String> = HashMap::new();
        for _ in 0..500 {
            let (plain, named) = (anonymous.next_request(), keyed.next_request());
            assert_eq!(
                plain.messages, named.messages,
                "same conversations either way"
            );
            let session = named.session_id.unwrap();
            let opening = named.messages[1].content.clone();
            assert_eq!(sessions.entry(session).or_insert(opening.clone()), &opening);
        }
    }
}
