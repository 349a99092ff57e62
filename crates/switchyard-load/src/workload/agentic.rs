//! Agentic chat fleets: many multi-turn conversations at once, in groups that share one long
//! system prompt, each turn sending the whole history, and (by default) nothing that names the
//! conversation: no session header, no `user`, as the OpenAI SDKs and most agents send.
//!
//! Each conversation behaves as a real chat client: its next turn is sent only once the answer
//! to the previous one is back, and carries that answer's text in the history. Arrivals stay
//! open-loop: each one continues a conversation picked at random among those not waiting for
//! an answer, or opens a new one when every conversation is waiting. A failed turn ends its
//! conversation (the user gives up; a retrying client is the `--client-retry` groups' job), and
//! its slot opens a fresh one. The request sequence therefore depends on the answers and their
//! timing; the load tool's `--trace-out` records what was actually sent.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::request::{ChatMessage, PlannedRequest, TurnTicket};
use super::text::{derive_seed, random_words};
use super::zipf::Zipf;

/// Conversations kept open; more are opened only while all of these wait for answers.
const ACTIVE_CONVERSATIONS: usize = 96;
/// Applications, each with its own system prompt; their popularity is Zipf-skewed, so one
/// system prompt opens about a third of all conversations.
const GROUPS: usize = 8;
const GROUP_ZIPF_EXPONENT: f64 = 1.0;
const SYSTEM_PROMPT_WORDS: usize = 800;
const USER_TURN_WORDS: std::ops::RangeInclusive<usize> = 80..=120;
/// A conversation ends after a number of turns drawn uniformly from 1..=this.
pub const MAX_AGENTIC_TURNS: usize = 12;

const SYSTEM_PROMPT_STREAM: u64 = 11;
const TURN_STREAM: u64 = 12;

/// Whether requests say which conversation they belong to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identity {
    /// No session header, no `user`: the gateway sees only the messages.
    Anonymous,
    /// The conversation id as `x-session-id` (and nothing as `user`).
    SessionHeader,
}

#[derive(Debug)]
struct Conversation {
    id: u64,
    group: usize,
    length: usize,
    /// Everything after the system prompt: user, assistant, user, ...
    history: Vec<ChatMessage>,
    /// A turn was sent and its answer is not back yet.
    waiting: bool,
}

impl Conversation {
    fn user_turns(&self) -> usize {
        self.history.len().div_ceil(2)
    }
}

#[derive(Debug)]
enum Slot {
    /// Free: the next pick opens a conversation here.
    Empty,
    Open(Conversation),
    /// An overflow slot whose conversation ended; reused only when every slot is busy again.
    Retired,
}

#[derive(Debug)]
pub struct AgenticWorkload {
    identity: Identity,
    rng: SmallRng,
    system_prompts: Vec<String>,
    groups: Zipf,
    slots: Vec<Slot>,
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
            identity,
            rng: SmallRng::seed_from_u64(derive_seed(seed, TURN_STREAM)),
            system_prompts,
            groups: Zipf::new(GROUPS, GROUP_ZIPF_EXPONENT),
            slots: (0..ACTIVE_CONVERSATIONS).map(|_| Slot::Empty).collect(),
            next_id: 0,
        }
    }

    /// A slot whose conversation can take a turn now, at random; a new (or retired overflow)
    /// slot when every conversation waits for an answer.
    fn pick_slot(&mut self) -> usize {
        let idle: Vec<usize> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, slot)| match slot {
                Slot::Empty => true,
                Slot::Open(conversation) => !conversation.waiting,
                Slot::Retired => false,
            })
            .map(|(index, _)| index)
            .collect();
        if !idle.is_empty() {
            return idle[self.rng.random_range(0..idle.len())];
        }
        if let Some(index) = self
            .slots
            .iter()
            .position(|slot| matches!(slot, Slot::Retired))
        {
            self.slots[index] = Slot::Empty;
            return index;
        }
        self.slots.push(Slot::Empty);
        self.slots.len() - 1
    }

    pub fn next_request(&mut self) -> PlannedRequest {
        let index = self.pick_slot();
        if !matches!(self.slots[index], Slot::Open(_)) {
            let conversation = Conversation {
                id: self.next_id,
                group: self.groups.sample(&mut self.rng),
                length: self.rng.random_range(1..=MAX_AGENTIC_TURNS),
                history: Vec::new(),
                waiting: false,
            };
            self.next_id += 1;
            self.slots[index] = Slot::Open(conversation);
        }
        let user_words = self.rng.random_range(USER_TURN_WORDS);
        let user_turn = random_words(&mut self.rng, user_words);
        let Slot::Open(conversation) = &mut self.slots[index] else {
            unreachable!("the slot was just opened")
        };
        conversation.history.push(ChatMessage::user(user_turn));
        conversation.waiting = true;
        let mut messages = Vec::with_capacity(1 + conversation.history.len());
        messages.push(ChatMessage::system(
            self.system_prompts[conversation.group].clone(),
        ));
        messages.extend(conversation.history.iter().cloned());
        PlannedRequest {
            session_id: match self.identity {
                Identity::Anonymous => None,
                Identity::SessionHeader => Some(format!("c{}", conversation.id)),
            },
            user: None,
            messages,
            turn: Some(TurnTicket {
                session: index,
                conversation: conversation.id,
                turn: conversation.user_turns() - 1,
            }),
        }
    }

    /// The answer to a turn (`None`: the turn failed). The conversation continues with the
    /// answer's exact text, ends after its last turn, and ends at once on a failure.
    pub fn record_answer(&mut self, ticket: TurnTicket, answer: Option<&str>) {
        let Some(slot) = self.slots.get_mut(ticket.session) else {
            return;
        };
        let Slot::Open(conversation) = slot else {
            return;
        };
        let current = conversation.id == ticket.conversation
            && conversation.waiting
            && conversation.user_turns() == ticket.turn + 1;
        if !current {
            return;
        }
        let ended = match answer {
            Some(text) => {
                conversation.history.push(ChatMessage::assistant(text));
                conversation.waiting = false;
                conversation.user_turns() >= conversation.length
            }
            None => true,
        };
        if ended {
            *slot = if ticket.session < ACTIVE_CONVERSATIONS {
                Slot::Empty
            } else {
                Slot::Retired
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn words(message: &ChatMessage) -> usize {
        message.content.split_whitespace().count()
    }

    fn opening(request: &PlannedRequest) -> (String, String) {
        (
            request.messages[0].content.clone(),
            request.messages[1].content.clone(),
        )
    }

    /// Answers every request at once with a text unique to it.
    fn answered(workload: &mut AgenticWorkload, index: usize) -> PlannedRequest {
        let request = workload.next_request();
        let ticket = request.turn.expect("agentic requests carry a ticket");
        workload.record_answer(
            ticket,
            Some(&format!("answer {index} for turn {}", ticket.turn)),
        );
        request
    }

    #[test]
    fn each_turn_resends_the_whole_history_with_the_answers_and_names_nothing() {
        let mut workload = AgenticWorkload::new(4, Identity::Anonymous);
        let mut history: HashMap<(String, String), Vec<ChatMessage>> = HashMap::new();
        let mut longest = 0;
        for index in 0..4000 {
            let request = answered(&mut workload, index);
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
            let key = opening(&request);
            if let Some(earlier) = history.get(&key) {
                assert_eq!(
                    &messages[..earlier.len()],
                    &earlier[..],
                    "history never changes and carries the answer"
                );
                assert_eq!(messages.len(), earlier.len() + 1);
            } else {
                assert_eq!(turns, 1, "a new opening is a first turn");
            }
            let mut with_answer = messages.clone();
            with_answer.push(ChatMessage::assistant(format!(
                "answer {index} for turn {}",
                turns - 1
            )));
            history.insert(key, with_answer);
        }
        assert_eq!(longest, MAX_AGENTIC_TURNS);
    }

    #[test]
    fn the_next_turn_waits_for_the_answer_and_carries_its_text() {
        let mut workload = AgenticWorkload::new(5, Identity::Anonymous);
        let first = workload.next_request();
        let waiting = opening(&first);
        // Two-turn conversations or longer: find one, leaving the others waiting too.
        let mut unanswered = vec![first];
        for _ in 0..300 {
            let request = workload.next_request();
            assert_ne!(
                opening(&request),
                waiting,
                "no turn while the previous answer is outstanding"
            );
            assert_eq!(
                request.messages.len(),
                2,
                "every conversation waits: all are new"
            );
            unanswered.push(request);
        }
        assert!(
            workload.slots.len() > ACTIVE_CONVERSATIONS,
            "more opened while all wait"
        );
        // Answer everything; conversations of one turn end, the rest continue with the text.
        let mut answers = HashMap::new();
        for (index, request) in unanswered.iter().enumerate() {
            let text = format!("the worker said {index}");
            workload.record_answer(request.turn.expect("ticket"), Some(&text));
            answers.insert(opening(request), text);
        }
        let mut continued = 0;
        for _ in 0..2000 {
            let request = workload.next_request();
            if let Some(text) = answers.remove(&opening(&request)) {
                assert_eq!(request.messages.len(), 4, "the second turn");
                assert_eq!(request.messages[2], ChatMessage::assistant(text));
                continued += 1;
            }
            let ticket = request.turn.expect("ticket");
            workload.record_answer(ticket, Some("ok"));
        }
        assert!(continued > 50, "{continued}");
    }

    #[test]
    fn a_failed_turn_ends_its_conversation_and_late_answers_are_ignored() {
        let mut workload = AgenticWorkload::new(7, Identity::Anonymous);
        let failed = workload.next_request();
        let ticket = failed.turn.expect("ticket");
        workload.record_answer(ticket, None);
        // A late answer for the failed turn changes nothing.
        workload.record_answer(ticket, Some("too late"));
        for index in 0..3000 {
            let request = answered(&mut workload, index);
            assert!(
                request.messages.len() == 2 || opening(&request) != opening(&failed),
                "the failed conversation never continues"
            );
            assert!(request.messages.iter().all(|m| m.content != "too late"));
        }
        assert!(
            workload.slots.len() == ACTIVE_CONVERSATIONS,
            "no overflow when answered"
        );
    }

    #[test]
    fn turns_are_about_a_hundred_words_under_an_eight_hundred_word_system_prompt() {
        let mut workload = AgenticWorkload::new(2, Identity::Anonymous);
        let mut groups = HashMap::new();
        for index in 0..2000 {
            let request = answered(&mut workload, index);
            let system = &request.messages[0];
            assert!((800..820).contains(&words(system)), "{}", words(system));
            for message in request.messages[1..].iter().filter(|m| m.role == "user") {
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
        for index in 0..500 {
            let (plain, named) = (answered(&mut anonymous, index), answered(&mut keyed, index));
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
