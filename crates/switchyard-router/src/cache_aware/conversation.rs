//! Which conversation a chat request belongs to, from its prompt alone.
//!
//! Several gateway replicas see different turns of the same conversation, so where a turn goes
//! must be a function of what every replica can read in the request. A session key alone is
//! too coarse (one busy session would pin a worker forever) and the prompt grows every turn;
//! what stays fixed for the whole conversation is its opening: the system prompt and the first
//! user message. Hashing that opening together with the session key names the conversation the
//! same way on every replica and at every turn, and a session's next conversation lands on a
//! fresh ring position, which spreads busy sessions without any load signal.

use super::key::KeyOf;
use super::matching::Affinity;
use crate::hash::stable_hash_seeded;
use crate::routing_key::RoutingKeySource;

/// How the gateway flattens chat messages into the prompt: `<|role|>content\n` per message, in
/// order (`switchyard-gateway`'s `openai::flatten_messages`; a gateway test pins the two
/// together).
pub const USER_TURN_MARKER: &str = "<|user|>";
/// Starts every message after the first.
const NEXT_MESSAGE: &str = "\n<|";
/// Hash seed of conversations named by their opening alone.
const ANONYMOUS: u64 = 0x616e_6f6e_796d_6f75;

/// A chat conversation, named by its opening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Conversation {
    /// Ring position and placement-override key: the opening hashed under the routing key.
    pub(super) key: u64,
    /// The prompt is the opening itself: no worker can hold anything of this conversation
    /// yet, so placing it off its ring owner costs nothing.
    pub(super) first_turn: bool,
}

impl Conversation {
    /// None when the prompt is not a flattened chat with a user message (e.g. a completion).
    /// A chat sent without session or user: named by its opening alone, which (system prompt
    /// plus first user message) differs between conversations and is resent by every turn.
    pub(super) fn anonymous(prompt: &str) -> Option<Self> {
        Self::of(prompt, ANONYMOUS)
    }

    pub(super) fn of(prompt: &str, routing_key_hash: u64) -> Option<Self> {
        let opening = opening(prompt)?;
        Some(Self {
            key: stable_hash_seeded(opening.as_bytes(), routing_key_hash),
            first_turn: opening.len() == prompt.len(),
        })
    }
}

/// The conversation a request belongs to, the key it is placed, overridden and announced by,
/// and which cached prefixes tie it to a worker. A chat is named alike by every replica at
/// every turn: by its opening under the session or user key, or, with neither sent and
/// `anonymous` set, by its opening alone (never by the shared system prompt, which would pile
/// every conversation of an application onto one worker).
pub(super) fn identify<'r>(
    key: Option<KeyOf<'r>>,
    prompt: &str,
    anonymous: bool,
) -> (Option<KeyOf<'r>>, Option<Conversation>, Affinity) {
    let identified = matches!(
        key.map(|key| key.source),
        Some(RoutingKeySource::Session | RoutingKeySource::User)
    );
    let conversation = match key {
        Some(key) if identified => Conversation::of(prompt, key.hash),
        Some(_) if anonymous => Conversation::anonymous(prompt),
        _ => None,
    };
    let affinity = if identified || conversation.is_some() {
        Affinity::Continuation
    } else {
        Affinity::SharedPrefix
    };
    let key = match (key, conversation) {
        (Some(key), Some(conversation)) => Some(KeyOf {
            hash: conversation.key,
            ..key
        }),
        (key, _) => key,
    };
    (key, conversation, affinity)
}

/// What precedes the first user message (the system prompt, as flattened), None when empty or
/// when the prompt is not a flattened chat.
pub(super) fn system_part(prompt: &str) -> Option<&str> {
    let user = prompt.find(USER_TURN_MARKER)?;
    Some(&prompt[..user]).filter(|system| !system.is_empty())
}

/// The turns a conversation has sent so far, wherever they went: its history's user messages.
pub(super) fn turns(prompt: &str) -> u32 {
    u32::try_from(prompt.matches(USER_TURN_MARKER).count()).unwrap_or(u32::MAX)
}

/// Whether an earlier prompt of this conversation, `cached` bytes long, was its previous turn:
/// it holds every user message but the newest. One holding fewer was an older turn, and the
/// turns since were routed without it.
pub(super) fn reaches_previous_turn(prompt: &str, cached: usize) -> bool {
    let held = prompt.get(..cached).map_or(0, turns);
    held.saturating_add(1) >= turns(prompt)
}

/// The prompt up to the end of its first user message.
fn opening(prompt: &str) -> Option<&str> {
    let user = prompt.find(USER_TURN_MARKER)?;
    let body = user + USER_TURN_MARKER.len();
    let end = prompt[body..]
        .find(NEXT_MESSAGE)
        .map_or(prompt.len(), |at| body + at + 1);
    Some(&prompt[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const TURN_1: &str = "<|system|>be brief\n<|user|>hi\n";
    const TURN_2: &str = "<|system|>be brief\n<|user|>hi\n<|assistant|>hello\n<|user|>more\n";

    #[test]
    fn every_turn_of_a_conversation_has_the_same_key() {
        let first = Conversation::of(TURN_1, 7).unwrap();
        let second = Conversation::of(TURN_2, 7).unwrap();
        assert_eq!(first.key, second.key);
        assert!(first.first_turn && !second.first_turn);
        assert_eq!(opening(TURN_2), Some(TURN_1));
    }

    #[test]
    fn another_opening_or_another_session_is_another_conversation() {
        let other_opening = Conversation::of("<|system|>be brief\n<|user|>ho\n", 7).unwrap();
        assert_ne!(other_opening.key, Conversation::of(TURN_1, 7).unwrap().key);
        assert_ne!(
            Conversation::of(TURN_1, 8).unwrap().key,
            Conversation::of(TURN_1, 7).unwrap().key
        );
    }

    #[test]
    fn a_multi_line_user_message_belongs_to_the_opening_and_plain_prompts_have_none() {
        let prompt = "<|user|>line one\nline two\n<|assistant|>ok\n";
        assert_eq!(opening(prompt), Some("<|user|>line one\nline two\n"));
        assert!(!Conversation::of(prompt, 1).unwrap().first_turn);
        assert_eq!(Conversation::of("Summarise: <|sys|> text", 1), None);
    }

    #[test]
    fn a_conversations_turns_are_its_user_messages() {
        assert_eq!((turns(TURN_1), turns(TURN_2)), (1, 2));
        assert_eq!(turns("no chat at all"), 0);
    }

    #[test]
    fn only_an_earlier_prompt_holding_all_but_the_newest_user_message_is_the_previous_turn() {
        const TURN_3: &str = "<|system|>be brief\n<|user|>hi\n<|assistant|>hello\n\
                              <|user|>more\n<|assistant|>ok\n<|user|>again\n";
        assert!(reaches_previous_turn(TURN_2, TURN_1.len()));
        assert!(reaches_previous_turn(TURN_3, TURN_2.len()));
        assert!(
            !reaches_previous_turn(TURN_3, TURN_1.len()),
            "two turns back"
        );
        assert!(!reaches_previous_turn(TURN_3, 0));
        // A length past the prompt or inside a character holds nothing.
        assert!(!reaches_previous_turn(TURN_3, TURN_3.len() + 1));
        assert!(
            reaches_previous_turn(TURN_1, 0),
            "a first turn has no previous one"
        );
    }

    #[test]
    fn the_system_part_is_what_precedes_the_first_user_message() {
        assert_eq!(system_part(TURN_2), Some("<|system|>be brief\n"));
        assert_eq!(system_part("<|user|>hi\n"), None);
        assert_eq!(system_part("no chat at all"), None);
    }
}
