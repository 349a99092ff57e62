//! Deterministic prompt generators, one per [`Workload`].

mod agentic;
mod hotkey;
mod multiturn;
mod text;
mod uniform;
mod zipf;

use serde::Serialize;

use crate::Workload;
pub(crate) use text::derive_seed;

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

#[derive(Debug)]
pub enum WorkloadGenerator {
    Agentic(agentic::AgenticWorkload),
    Multiturn(multiturn::MultiturnWorkload),
    Hotkey(hotkey::HotkeyWorkload),
    Uniform(uniform::UniformWorkload),
}

impl WorkloadGenerator {
    pub fn new(workload: Workload, seed: u64) -> Self {
        match workload {
            Workload::Multiturn => Self::Multiturn(multiturn::MultiturnWorkload::new(seed)),
            Workload::Hotkey => Self::Hotkey(hotkey::HotkeyWorkload::new(seed)),
            Workload::Uniform => Self::Uniform(uniform::UniformWorkload::new(seed)),
            Workload::Agentic => Self::Agentic(agentic::AgenticWorkload::new(
                seed,
                agentic::Identity::Anonymous,
            )),
            Workload::AgenticKeyed => Self::Agentic(agentic::AgenticWorkload::new(
                seed,
                agentic::Identity::SessionHeader,
            )),
        }
    }

    pub fn next_request(&mut self) -> PlannedRequest {
        match self {
            Self::Multiturn(workload) => workload.next_request(),
            Self::Hotkey(workload) => workload.next_request(),
            Self::Uniform(workload) => workload.next_request(),
            Self::Agentic(workload) => workload.next_request(),
        }
    }

    /// Feeds the answer (or `None` after a failure) back so the conversation can continue.
    pub fn record_answer(&mut self, ticket: TurnTicket, answer: Option<&str>) {
        match self {
            Self::Multiturn(workload) => workload.record_answer(ticket, answer),
            Self::Agentic(workload) => workload.record_answer(ticket, answer),
            Self::Hotkey(_) | Self::Uniform(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transcript(workload: Workload, seed: u64) -> Vec<(Option<String>, Vec<ChatMessage>)> {
        let mut generator = WorkloadGenerator::new(workload, seed);
        (0..40)
            .map(|_| {
                let request = generator.next_request();
                (request.session_id, request.messages)
            })
            .collect()
    }

    #[test]
    fn every_workload_is_deterministic_per_seed() {
        for workload in [
            Workload::Multiturn,
            Workload::Hotkey,
            Workload::Uniform,
            Workload::Agentic,
            Workload::AgenticKeyed,
        ] {
            assert_eq!(
                transcript(workload, 9),
                transcript(workload, 9),
                "{workload:?}"
            );
            assert_ne!(
                transcript(workload, 9),
                transcript(workload, 10),
                "{workload:?}"
            );
        }
    }
}
