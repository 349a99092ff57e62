//! Multi-turn chat sessions over a few long shared system prompts.
//!
//! The conversation history soon dominates the prompt, so a router that keeps a session on one
//! worker gets far more prefix-cache hits than one that spreads it.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::request::{ChatMessage, PlannedRequest, TurnTicket};
use super::text::{derive_seed, random_words};
use super::zipf::Zipf;

const SYSTEM_PROMPTS: usize = 4;
const SYSTEM_PROMPT_WORDS: usize = 300;
const SESSIONS: usize = 256;
const SESSION_ZIPF_EXPONENT: f64 = 1.1;
const USER_TURN_WORDS: std::ops::RangeInclusive<usize> = 60..=80;
const STAND_IN_ANSWER_WORDS: usize = 40;
/// A session holding this many turns starts a new conversation on its next request.
pub const MAX_TURNS: usize = 16;

const SYSTEM_PROMPT_STREAM: u64 = 1;
const TURN_STREAM: u64 = 2;
const STAND_IN_STREAM: u64 = 3;

#[derive(Debug, Default)]
struct Turn {
    user: String,
    assistant: Option<String>,
}

#[derive(Debug, Default)]
struct Session {
    /// Bumped on every restart so late answers from an old conversation are ignored.
    conversation: u64,
    turns: Vec<Turn>,
}

#[derive(Debug)]
pub struct MultiturnWorkload {
    seed: u64,
    rng: SmallRng,
    system_prompts: Vec<String>,
    sessions: Vec<Session>,
    session_popularity: Zipf,
}

impl MultiturnWorkload {
    pub fn new(seed: u64) -> Self {
        let mut prompt_rng = SmallRng::seed_from_u64(derive_seed(seed, SYSTEM_PROMPT_STREAM));
        let system_prompts = (0..SYSTEM_PROMPTS)
            .map(|index| {
                format!(
                    "You are assistant persona {index}. Follow the house style below. {}",
                    random_words(&mut prompt_rng, SYSTEM_PROMPT_WORDS)
                )
            })
            .collect();
        Self {
            seed,
            rng: SmallRng::seed_from_u64(derive_seed(seed, TURN_STREAM)),
            system_prompts,
            sessions: (0..SESSIONS).map(|_| Session::default()).collect(),
            session_popularity: Zipf::new(SESSIONS, SESSION_ZIPF_EXPONENT),
        }
    }

    pub fn next_request(&mut self) -> PlannedRequest {
        let session_index = self.session_popularity.sample(&mut self.rng);
        let user_words = self.rng.random_range(USER_TURN_WORDS);
        let user_turn = random_words(&mut self.rng, user_words);
        let seed = self.seed;
        let session = &mut self.sessions[session_index];
        if session.turns.len() >= MAX_TURNS {
            session.turns.clear();
            session.conversation += 1;
        }

        let mut messages = Vec::with_capacity(2 + 2 * session.turns.len());
        messages.push(ChatMessage::system(
            self.system_prompts[session_index % SYSTEM_PROMPTS].clone(),
        ));
        for (turn_index, turn) in session.turns.iter_mut().enumerate() {
            // Once history has been sent, it must never change: freeze a stand-in for answers
            // still in flight so later requests keep the exact same prefix.
            let ticket = TurnTicket {
                session: session_index,
                conversation: session.conversation,
                turn: turn_index,
            };
            let answer = turn
                .assistant
                .get_or_insert_with(|| stand_in_answer(seed, ticket));
            messages.push(ChatMessage::user(turn.user.clone()));
            messages.push(ChatMessage::assistant(answer.clone()));
        }
        messages.push(ChatMessage::user(user_turn.clone()));
        session.turns.push(Turn {
            user: user_turn,
            assistant: None,
        });

        let session_id = format!("s{session_index}");
        PlannedRequest {
            user: Some(session_id.clone()),
            session_id: Some(session_id),
            messages,
            turn: Some(TurnTicket {
                session: session_index,
                conversation: session.conversation,
                turn: session.turns.len() - 1,
            }),
        }
    }

    pub fn record_answer(&mut self, ticket: TurnTicket, answer: Option<&str>) {
        let Some(session) = self.sessions.get_mut(ticket.session) else {
            return;
        };
        if session.conversation != ticket.conversation {
            return;
        }
        if let Some(turn) = session.turns.get_mut(ticket.turn) {
            if turn.assistant.is_none() {
                let text = match answer.map(str::trim) {
                    Some(text) if !text.is_empty() => text.to_owned(),
                    _ => stand_in_answer(self.seed, ticket),
                };
                turn.assistant = Some(text);
            }
        }
    }
}

/// Depends only on the seed and the turn's identity, never on timing, so runs stay reproducible
/// even when answers arrive late or not at all.
fn stand_in_answer(seed: u64, ticket: TurnTicket) -> String {
    let turn_key =
        ((ticket.session as u64) << 40) ^ (ticket.conversation << 20) ^ (ticket.turn as u64);
    let mut rng =
        SmallRng::seed_from_u64(derive_seed(derive_seed(seed, STAND_IN_STREAM), turn_key));
    random_words(&mut rng, STAND_IN_ANSWER_WORDS)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn word_count(messages: &[ChatMessage]) -> usize {
        messages
            .iter()
            .map(|message| message.content.split_whitespace().count())
            .sum()
    }

    #[test]
    fn sessions_grow_one_turn_per_request_and_restart_after_max_turns() {
        let mut workload = MultiturnWorkload::new(5);
        let mut turns_seen: HashMap<Option<String>, usize> = HashMap::new();
        let mut previous: HashMap<Option<String>, Vec<ChatMessage>> = HashMap::new();
        let mut restarts = 0;
        for request_index in 0..3000 {
            let request = workload.next_request();
            let expected_turns = turns_seen.entry(request.session_id.clone()).or_insert(0);
            if *expected_turns == MAX_TURNS {
                *expected_turns = 0;
                restarts += 1;
            }
            // system + (user, assistant) per earlier turn + the new user turn
            assert_eq!(request.messages.len(), 2 + 2 * *expected_turns);
            if let Some(earlier) = previous.get(&request.session_id) {
                if *expected_turns > 0 {
                    assert_eq!(&request.messages[..earlier.len()], &earlier[..]);
                }
            }
            *expected_turns += 1;
            let answer = format!("answer number {request_index}");
            let ticket = request.turn.expect("multiturn requests carry a ticket");
            workload.record_answer(ticket, Some(&answer));
            let mut with_answer = request.messages.clone();
            with_answer.push(ChatMessage::assistant(answer));
            previous.insert(request.session_id.clone(), with_answer);
            assert_eq!(request.user, request.session_id);
        }
        assert!(restarts > 0, "the hottest sessions must wrap around");
    }

    #[test]
    fn unanswered_turns_get_a_frozen_stand_in_and_late_answers_are_ignored() {
        let mut workload = MultiturnWorkload::new(1);
        let first = workload.next_request();
        let mut follow_up = workload.next_request();
        while follow_up.session_id != first.session_id {
            follow_up = workload.next_request();
        }
        let stand_in = follow_up.messages[2].content.clone();
        assert_eq!(stand_in.split_whitespace().count(), STAND_IN_ANSWER_WORDS);
        workload.record_answer(first.turn.expect("ticket"), Some("late answer"));
        let mut third = workload.next_request();
        while third.session_id != first.session_id {
            third = workload.next_request();
        }
        assert_eq!(third.messages[2].content, stand_in);
    }

    #[test]
    fn history_dominates_the_prompt_after_a_few_turns() {
        let mut workload = MultiturnWorkload::new(3);
        let mut request = workload.next_request();
        let session_id = request.session_id.clone();
        let mut turns = 1;
        while turns < 5 {
            workload.record_answer(request.turn.expect("ticket"), None);
            request = workload.next_request();
            if request.session_id == session_id {
                turns += 1;
            }
        }
        let system_words = word_count(&request.messages[..1]);
        let history_words = word_count(&request.messages[1..]);
        assert!(
            history_words > system_words,
            "{history_words} vs {system_words}"
        );
    }

    #[test]
    fn sessions_share_one_of_four_system_prompts() {
        let mut workload = MultiturnWorkload::new(8);
        let mut prompts = std::collections::HashSet::new();
        for _ in 0..500 {
            prompts.insert(workload.next_request().messages[0].content.clone());
        }
        assert_eq!(prompts.len(), SYSTEM_PROMPTS);
        let words = prompts.iter().next().map(|p| p.split_whitespace().count());
        assert!(words.is_some_and(|count| (300..340).contains(&count)));
    }
}
