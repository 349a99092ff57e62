//! What every workload produces: the chat requests to send and the tickets that route their
//! answers back into the right conversation.

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    pub role: &'static str,
    pub content: String,
}

impl ChatMessage {
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: "system",
            content: content.into(),
        }
    }

    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: "user",
            content: content.into(),
        }
    }

    pub fn assistant(content: impl Into<String>) -> Self {
        Self {
            role: "assistant",
            content: content.into(),
        }
    }
}

/// Identifies the turn a request opened, so its answer lands in the right conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnTicket {
    /// The workload's slot (session) the conversation lives in.
    pub(crate) session: usize,
    /// Which conversation of that slot: a late answer for an older one is ignored.
    pub(crate) conversation: u64,
    pub(crate) turn: usize,
}

/// One chat completion to send, before the transport adds model and sampling fields.
#[derive(Clone, Debug)]
pub struct PlannedRequest {
    /// Sent as `x-session-id` so session-affine routers can key on it (absent: not sent).
    pub session_id: Option<String>,
    /// Sent as the OpenAI `user` field when present.
    pub user: Option<String>,
    pub messages: Vec<ChatMessage>,
    /// Present when the answer should extend a conversation (multiturn, agentic).
    pub turn: Option<TurnTicket>,
}
