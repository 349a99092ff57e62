//! Deterministic prompt generators, one per [`Workload`].

mod agentic;
mod hotkey;
mod multiturn;
mod request;
mod text;
mod uniform;
mod zipf;

use crate::config::Workload;
pub use request::{ChatMessage, PlannedRequest, TurnTicket};
pub(crate) use text::derive_seed;

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
