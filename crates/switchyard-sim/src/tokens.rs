//! The simulator's tokenizer: whitespace-separated words in, deterministic words out.

/// Splits text into whitespace-separated tokens.
pub(crate) fn tokenize(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_owned).collect()
}

/// Renders one chat message as the engine sees it: `<|role|> content`.
pub(crate) fn render_message(role: &str, content: &str) -> String {
    format!("<|{role}|> {content}")
}

/// What a chat's next turn renders between the prompt and this answer's text: the assistant's
/// role tag (`render_message("assistant", answer)` minus the answer).
pub(crate) fn chat_answer_head() -> Vec<String> {
    tokenize(&render_message("assistant", ""))
}

const VOCABULARY: [&str; 32] = [
    "the", "router", "sends", "tokens", "to", "a", "warm", "worker", "cache", "hit", "prefix",
    "batch", "queue", "decode", "prefill", "latency", "stream", "gateway", "quota", "ledger",
    "replica", "shard", "model", "answer", "fast", "slow", "block", "chain", "fleet", "probe",
    "budget", "signal",
];

/// Deterministic output text: the same prompt always yields the same words,
/// so tests and demos can compare answers across runs and workers.
#[derive(Clone, Debug)]
pub(crate) struct OutputWords {
    seed: u64,
}

impl OutputWords {
    pub(crate) fn new(prompt_tokens: &[String]) -> Self {
        // FNV-1a over the prompt; collisions only make two answers look alike.
        let mut seed: u64 = 0xcbf2_9ce4_8422_2325;
        for byte in prompt_tokens.iter().flat_map(|t| t.bytes().chain([b' '])) {
            seed ^= u64::from(byte);
            seed = seed.wrapping_mul(0x0000_0100_0000_01b3);
        }
        Self { seed }
    }

    /// The text piece for output token `index`: a word, with a leading space
    /// after the first so that concatenated pieces read as a sentence.
    pub(crate) fn piece(&self, index: usize) -> String {
        let mixed = self
            .seed
            .wrapping_add((index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .rotate_left(17);
        let word = VOCABULARY[(mixed % VOCABULARY.len() as u64) as usize];
        if index == 0 {
            word.to_owned()
        } else {
            format!(" {word}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenize_splits_on_any_whitespace() {
        assert_eq!(tokenize("  a b\n\tc  "), vec!["a", "b", "c"]);
        assert!(tokenize("   ").is_empty());
    }

    #[test]
    fn message_rendering_prefixes_the_role() {
        let text = render_message("user", "hello world");
        assert_eq!(tokenize(&text), vec!["<|user|>", "hello", "world"]);
    }

    #[test]
    fn output_is_deterministic_and_word_counted() {
        let prompt = tokenize("say something");
        let words = OutputWords::new(&prompt);
        let text: String = (0..5).map(|i| words.piece(i)).collect();
        let again: String = (0..5).map(|i| OutputWords::new(&prompt).piece(i)).collect();
        assert_eq!(text, again);
        assert_eq!(tokenize(&text).len(), 5);
        assert!(!text.starts_with(' '));
    }
}
