//! Prompt text shared by the router benches: ~10 KB chat conversations on a few long system
//! prompts, like a fleet serving several assistants.

use rand::Rng;
use rand::rngs::SmallRng;

pub const WORKERS: u32 = 8;
pub const SYSTEM_PROMPTS: usize = 5;
pub const CONVERSATIONS: usize = 10_000;
pub const SYSTEM_BYTES: usize = 6 * 1024;
pub const TAIL_BYTES: usize = 4 * 1024;

const WORDS: &[&str] = &[
    "the",
    "model",
    "answer",
    "request",
    "worker",
    "token",
    "cache",
    "prefix",
    "user",
    "assistant",
    "please",
    "explain",
    "why",
    "latency",
    "quota",
    "budget",
    "route",
    "stream",
];

/// Random words up to `bytes` long.
pub fn text(rng: &mut SmallRng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        out.push_str(WORDS[rng.random_range(0..WORDS.len())]);
        out.push(' ');
    }
    out
}
