//! A few long hot prefixes carry most of the traffic; the rest are unique one-off prompts.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::request::{ChatMessage, PlannedRequest};
use super::text::{derive_seed, random_words};

const HOT_KEYS: usize = 3;
const HOT_PREFIX_WORDS: usize = 400;
pub const HOT_SHARE: f64 = 0.8;
const TAIL_WORDS: std::ops::RangeInclusive<usize> = 8..=16;
const COLD_PROMPT_WORDS: std::ops::RangeInclusive<usize> = 150..=250;

const PREFIX_STREAM: u64 = 11;
const REQUEST_STREAM: u64 = 12;

#[derive(Debug)]
pub struct HotkeyWorkload {
    rng: SmallRng,
    hot_prefixes: Vec<String>,
}

impl HotkeyWorkload {
    pub fn new(seed: u64) -> Self {
        let mut prefix_rng = SmallRng::seed_from_u64(derive_seed(seed, PREFIX_STREAM));
        let hot_prefixes = (0..HOT_KEYS)
            .map(|_| random_words(&mut prefix_rng, HOT_PREFIX_WORDS))
            .collect();
        Self {
            rng: SmallRng::seed_from_u64(derive_seed(seed, REQUEST_STREAM)),
            hot_prefixes,
        }
    }

    pub fn next_request(&mut self) -> PlannedRequest {
        if self.rng.random_bool(HOT_SHARE) {
            let key = self.rng.random_range(0..HOT_KEYS);
            let tail_words = self.rng.random_range(TAIL_WORDS);
            PlannedRequest {
                session_id: Some(format!("hot{key}")),
                user: None,
                messages: vec![
                    ChatMessage::system(self.hot_prefixes[key].clone()),
                    ChatMessage::user(random_words(&mut self.rng, tail_words)),
                ],
                turn: None,
            }
        } else {
            let words = self.rng.random_range(COLD_PROMPT_WORDS);
            let session_id = format!("r{:016x}", self.rng.random::<u64>());
            PlannedRequest {
                session_id: Some(session_id),
                user: None,
                messages: vec![ChatMessage::user(random_words(&mut self.rng, words))],
                turn: None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_keys_carry_about_eighty_percent() {
        let mut workload = HotkeyWorkload::new(4);
        let draws = 5000;
        let hot = (0..draws)
            .filter(|_| {
                workload
                    .next_request()
                    .session_id
                    .is_some_and(|s| s.starts_with("hot"))
            })
            .count();
        let share = hot as f64 / f64::from(draws);
        assert!((0.77..0.83).contains(&share), "hot share {share}");
    }

    #[test]
    fn hot_requests_share_their_prefix_and_cold_ones_are_unique() {
        let mut workload = HotkeyWorkload::new(6);
        let mut cold_prompts = std::collections::HashSet::new();
        for _ in 0..500 {
            let request = workload.next_request();
            if let Some(key) = request
                .session_id
                .as_deref()
                .and_then(|s| s.strip_prefix("hot"))
            {
                let key: usize = key.parse().expect("numeric hot key");
                assert_eq!(request.messages[0].content, workload.hot_prefixes[key]);
            } else {
                assert!(cold_prompts.insert(request.messages[0].content.clone()));
            }
        }
        assert!(!cold_prompts.is_empty());
    }
}
