//! The engine's prefix cache driven offline, one request after another: what a worker would
//! have served from its cache had it seen this sequence of prompts. Offline replays (the
//! sticky-session oracle, a router replay) use it so their hit rates are the simulator's.

use crate::config::BLOCK_TOKENS;
use crate::kv_cache::{BlockKey, PrefixCache, block_keys};
use crate::tokens::{OutputWords, chat_answer_head, render_message, tokenize};

/// A chat prompt as the engine sees it: its token count and the keys of its full blocks, and
/// the blocks the engine keeps after answering it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatBlocks {
    pub prompt_tokens: usize,
    pub keys: Vec<BlockKey>,
    /// The prompt, the assistant tag and the answer's tokens but the last: what the engine
    /// computed and caches (just `keys` when no answer came back).
    pub computed: Vec<BlockKey>,
}

/// Tokens of a chat prompt, rendered exactly as the HTTP front end renders `messages`.
fn chat_tokens<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    let rendered: Vec<String> = messages
        .into_iter()
        .map(|(role, content)| render_message(role, content))
        .collect();
    tokenize(&rendered.join(" "))
}

impl ChatBlocks {
    /// `messages` are (role, content) pairs; no answer came back.
    pub fn of<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self::answered(messages, None)
    }

    /// As [`ChatBlocks::of`], with the answer the engine gave (as the client received it).
    pub fn answered<'a>(
        messages: impl IntoIterator<Item = (&'a str, &'a str)>,
        answer: Option<&str>,
    ) -> Self {
        let tokens = chat_tokens(messages);
        let keys = block_keys(&tokens);
        let computed = match answer {
            Some(answer) => {
                let answer = tokenize(answer);
                let mut all = tokens.clone();
                all.extend(chat_answer_head());
                all.extend(answer.iter().take(answer.len().saturating_sub(1)).cloned());
                block_keys(&all)
            }
            None => keys.clone(),
        };
        Self {
            prompt_tokens: tokens.len(),
            keys,
            computed,
        }
    }
}

/// The answer a simulated worker gives to a chat with these messages and `max_tokens`, as the
/// client assembles it from the stream.
pub fn simulated_answer<'a>(
    messages: impl IntoIterator<Item = (&'a str, &'a str)>,
    max_tokens: usize,
) -> String {
    let words = OutputWords::new(&chat_tokens(messages));
    (0..max_tokens.max(1))
        .map(|index| words.piece(index))
        .collect()
}

/// One worker's prefix cache (LRU over `kv_blocks` blocks) fed requests in order.
#[derive(Debug)]
pub struct KvReplay {
    cache: PrefixCache,
}

impl KvReplay {
    pub fn new(kv_blocks: usize) -> Self {
        Self {
            cache: PrefixCache::new(kv_blocks),
        }
    }

    /// Serves one prompt as the engine does (look up, then cache what it computed: the
    /// prompt's blocks and those of its answer) and returns how many of its tokens came from
    /// the cache.
    pub fn serve(&mut self, prompt: &ChatBlocks) -> usize {
        let cached = self.cache.lookup(&prompt.keys) * BLOCK_TOKENS;
        self.cache.insert(&prompt.computed);
        cached
    }

    /// Blocks currently cached.
    pub fn len(&self) -> usize {
        self.cache.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(prefix: &str, count: usize) -> String {
        (0..count)
            .map(|i| format!("{prefix}{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn a_continued_conversation_hits_its_earlier_full_blocks() {
        let system = words("s", 63);
        let first = ChatBlocks::of([("system", system.as_str()), ("user", "hello there")]);
        // "<|system|>" + 63 words + "<|user|>" + 2 words = 67 tokens: 4 full blocks.
        assert_eq!((first.prompt_tokens, first.keys.len()), (67, 4));
        let mut worker = KvReplay::new(100);
        assert_eq!(worker.serve(&first), 0);
        let second = ChatBlocks::of([
            ("system", system.as_str()),
            ("user", "hello there"),
            ("assistant", "hi"),
            ("user", "more please"),
        ]);
        assert_eq!(worker.serve(&second), 4 * BLOCK_TOKENS);
        // With the answer the engine gave, the next turn hits through it too.
        let answer = simulated_answer([("system", system.as_str()), ("user", "hello there")], 30);
        let answered = ChatBlocks::answered(
            [("system", system.as_str()), ("user", "hello there")],
            Some(&answer),
        );
        // 67 prompt tokens + the assistant tag + 29 answer tokens = 97: six full blocks.
        assert_eq!(answered.computed.len(), 6);
        let mut engine = KvReplay::new(100);
        engine.serve(&answered);
        let third = ChatBlocks::of([
            ("system", system.as_str()),
            ("user", "hello there"),
            ("assistant", answer.as_str()),
            ("user", "more please"),
        ]);
        assert_eq!(engine.serve(&third), 6 * BLOCK_TOKENS);
        let mut small = KvReplay::new(2);
        small.serve(&first);
        assert_eq!(
            small.serve(&second),
            2 * BLOCK_TOKENS,
            "capacity bounds the hit"
        );
    }
}
