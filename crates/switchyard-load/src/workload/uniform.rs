//! Unique random prompts: the no-sharing baseline where no routing can earn cache hits.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::request::{ChatMessage, PlannedRequest};
use super::text::{derive_seed, random_words};

const PROMPT_WORDS: std::ops::RangeInclusive<usize> = 180..=220;
const REQUEST_STREAM: u64 = 21;

#[derive(Debug)]
pub struct UniformWorkload {
    rng: SmallRng,
    issued: u64,
}

impl UniformWorkload {
    pub fn new(seed: u64) -> Self {
        Self {
            rng: SmallRng::seed_from_u64(derive_seed(seed, REQUEST_STREAM)),
            issued: 0,
        }
    }

    pub fn next_request(&mut self) -> PlannedRequest {
        let words = self.rng.random_range(PROMPT_WORDS);
        self.issued += 1;
        PlannedRequest {
            session_id: Some(format!("u{}", self.issued)),
            user: None,
            messages: vec![ChatMessage::user(random_words(&mut self.rng, words))],
            turn: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_unique_and_about_two_hundred_words() {
        let mut workload = UniformWorkload::new(2);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..300 {
            let request = workload.next_request();
            let content = request.messages[0].content.clone();
            assert!((180..=220).contains(&content.split_whitespace().count()));
            // The first words differ too, so no prefix cache block is shared.
            let head: String = content.split_whitespace().take(4).collect();
            assert!(seen.insert(head));
        }
    }
}
