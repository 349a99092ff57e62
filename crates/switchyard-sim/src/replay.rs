//! The engine's prefix cache driven offline, one request after another: what a worker would
//! have served from its cache had it seen this sequence of prompts. Offline replays (the
//! sticky-session oracle, a router replay) use it so their hit rates are the simulator's.

use crate::config::BLOCK_TOKENS;
use crate::kv_cache::{BlockKey, PrefixCache, block_keys};
use crate::tokens::{render_message, tokenize};

/// A chat prompt as the engine sees it: its token count and the keys of its full blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatBlocks {
    pub prompt_tokens: usize,
    pub keys: Vec<BlockKey>,
}

impl ChatBlocks {
    /// `messages` are (role, content) pairs, rendered exactly as the HTTP front end renders them.
    pub fn of<'a>(messages: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let rendered: Vec<String> = messages
            .into_iter()
            .map(|(role, content)| render_message(role, content))
            .collect();
        let tokens = tokenize(&rendered.join(" "));
        Self {
            prompt_tokens: tokens.len(),
            keys: block_keys(&tokens),
        }
    }
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

    /// Serves one prompt as the engine does (look up, then cache the prompt's blocks) and
    /// returns how many of its tokens came from the cache.
    pub fn serve(&mut self, prompt: &ChatBlocks) -> usize {
        let cached = self.cache.lookup(&prompt.keys) * BLOCK_TOKENS;
        self.cache.insert(&prompt.keys);
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
        let mut small = KvReplay::new(2);
        small.serve(&first);
        assert_eq!(
            small.serve(&second),
            2 * BLOCK_TOKENS,
            "capacity bounds the hit"
        );
    }
}
