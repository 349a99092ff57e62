//! One request's life in the engine: queue, prefill, decode, finish.
//!
//! A `Generation` is driven by whoever answers the client (the SSE body or the
//! non-streaming handler), so when the client goes away the driver is dropped and
//! the `Drop` impl frees the slot and counts the cancellation: no background task.

use std::sync::Arc;

use tokio::time::Instant;

use crate::config::BLOCK_TOKENS;
use crate::engine::{Engine, EngineState, SlotGuard};
use crate::kv_cache::{BlockKey, block_keys};
use crate::tokens::OutputWords;

/// Token accounting reported to the client, in OpenAI's `usage` shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Usage {
    pub(crate) prompt_tokens: u64,
    pub(crate) completion_tokens: u64,
    pub(crate) total_tokens: u64,
    pub(crate) prompt_tokens_details: PromptTokensDetails,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub(crate) struct PromptTokensDetails {
    pub(crate) cached_tokens: u64,
}

/// What the engine produced next for a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GenEvent {
    /// One output token's text (a word, space-prefixed after the first).
    Token(String),
    /// All tokens produced; the slot is already free.
    Finished(Usage),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Queued,
    Decoding,
    Done,
}

pub(crate) struct Generation {
    engine: Arc<Engine>,
    prompt: Vec<String>,
    /// Tokens the engine puts between the prompt and its answer (a chat's assistant tag).
    answer_head: Vec<String>,
    block_keys: Vec<BlockKey>,
    prompt_tokens: usize,
    max_tokens: usize,
    words: OutputWords,
    arrived: Instant,
    /// A cold engine's reload ends here; the prefill waits for it.
    ready_at: Option<Instant>,
    last_token_at: Instant,
    /// Leading prompt blocks of this request that live in the shared cache.
    shared_blocks: usize,
    /// Blocks this request holds outside the shared cache, as last reported.
    private_blocks: usize,
    cached_tokens: usize,
    emitted: usize,
    slot: Option<SlotGuard>,
    phase: Phase,
}

impl Generation {
    /// Registers a new request; `max_tokens` is the already-capped output length.
    pub(crate) fn new(engine: Arc<Engine>, prompt: &[String], max_tokens: usize) -> Self {
        let ready_at = engine.arrive();
        let now = Instant::now();
        Self {
            prompt: prompt.to_vec(),
            answer_head: Vec::new(),
            block_keys: block_keys(prompt),
            prompt_tokens: prompt.len(),
            max_tokens: max_tokens.max(1),
            words: OutputWords::new(prompt),
            arrived: now,
            ready_at,
            last_token_at: now,
            shared_blocks: 0,
            private_blocks: 0,
            cached_tokens: 0,
            emitted: 0,
            slot: None,
            phase: Phase::Queued,
            engine,
        }
    }

    /// The answer follows `head` (for a chat, the assistant tag its next turn renders before
    /// the answer's text), so the cached answer blocks line up with that next turn's prompt.
    pub(crate) fn with_answer_head(mut self, head: Vec<String>) -> Self {
        self.answer_head = head;
        self
    }

    /// The next token or the final usage; `None` once finished. Cancel-safe in the
    /// sense that dropping `self` at any await point leaves the engine consistent.
    pub(crate) async fn next_event(&mut self) -> Option<GenEvent> {
        if self.phase != Phase::Done {
            // An engine hang or a stall fault holds the request here, slot and all.
            self.engine.faults.wait_while_stalled(self.emitted).await;
        }
        match self.phase {
            Phase::Queued => Some(self.prefill().await),
            Phase::Decoding if self.emitted < self.max_tokens => Some(self.decode().await),
            Phase::Decoding => Some(self.finish()),
            Phase::Done => None,
        }
    }

    /// Waits for the engine to be loaded and for a slot, prefills the uncached part of the
    /// prompt, emits token 0.
    async fn prefill(&mut self) -> GenEvent {
        if let Some(ready_at) = self.ready_at.take() {
            tokio::time::sleep_until(ready_at).await;
        }
        self.slot = Some(self.engine.acquire_slot().await);
        let prompt_tokens = self.prompt_tokens;
        let engine = Arc::clone(&self.engine);
        let (cached_tokens, running) = engine.with_state(|state| {
            self.shared_blocks = state.cache.lookup(&self.block_keys);
            let cached = self.shared_blocks * BLOCK_TOKENS;
            state.counters.prompt_tokens += prompt_tokens as u64;
            state.counters.cached_tokens += cached as u64;
            self.sync_private_blocks(state);
            (cached, state.scheduler.running())
        });
        self.cached_tokens = cached_tokens;
        let metrics = &self.engine.metrics;
        metrics.prompt_tokens.inc_by(prompt_tokens as f64);
        metrics.prefix_cache_queries.inc_by(prompt_tokens as f64);
        metrics.prefix_cache_hits.inc_by(cached_tokens as f64);

        let uncached = prompt_tokens.saturating_sub(cached_tokens);
        tokio::time::sleep(self.engine.prefill_duration(uncached, running)).await;

        engine.with_state(|state| {
            state.cache.insert(&self.block_keys);
            self.shared_blocks = self.block_keys.len();
            self.sync_private_blocks(state);
        });
        let now = Instant::now();
        self.engine
            .metrics
            .time_to_first_token
            .observe((now - self.arrived).as_secs_f64());
        self.phase = Phase::Decoding;
        self.emit_token(now)
    }

    async fn decode(&mut self) -> GenEvent {
        let running = self.engine.with_state(|state| state.scheduler.running());
        tokio::time::sleep(self.engine.decode_duration(running)).await;
        let now = Instant::now();
        self.engine
            .metrics
            .time_per_output_token
            .observe((now - self.last_token_at).as_secs_f64());
        self.emit_token(now)
    }

    fn emit_token(&mut self, now: Instant) -> GenEvent {
        let piece = self.words.piece(self.emitted);
        self.emitted += 1;
        self.last_token_at = now;
        let engine = Arc::clone(&self.engine);
        engine.with_state(|state| {
            state.counters.generation_tokens += 1;
            self.sync_private_blocks(state);
        });
        self.engine.metrics.generation_tokens.inc();
        GenEvent::Token(piece)
    }

    fn finish(&mut self) -> GenEvent {
        self.phase = Phase::Done;
        let engine = Arc::clone(&self.engine);
        let computed = self.computed_block_keys();
        engine.with_state(|state| {
            state.counters.requests_completed += 1;
            self.release_private_blocks(state);
            state.cache.insert(&computed);
        });
        self.slot = None;
        let metrics = &self.engine.metrics;
        metrics.request_success.inc();
        metrics
            .e2e_latency
            .observe((Instant::now() - self.arrived).as_secs_f64());
        let prompt = self.prompt_tokens as u64;
        let completion = self.emitted as u64;
        GenEvent::Finished(Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: PromptTokensDetails {
                cached_tokens: self.cached_tokens as u64,
            },
        })
    }

    /// Keys of the full blocks whose KV the engine computed: the prompt, the answer head and
    /// every emitted token but the last (its KV would only be computed by a further step).
    /// Prefix caches (vLLM's automatic prefix caching, SGLang's radix tree) keep these after
    /// the request ends, so a next turn carrying this answer hits through it.
    fn computed_block_keys(&self) -> Vec<BlockKey> {
        let answered = self.emitted.saturating_sub(1);
        let answer = (0..answered).map(|index| self.words.piece(index).trim().to_owned());
        let tokens: Vec<String> = self
            .prompt
            .iter()
            .chain(&self.answer_head)
            .cloned()
            .chain(answer)
            .collect();
        block_keys(&tokens)
    }

    /// Blocks for the prompt and the output so far, minus those the cache holds.
    fn sync_private_blocks(&mut self, state: &mut EngineState) {
        let needed = (self.prompt_tokens + self.emitted).div_ceil(BLOCK_TOKENS);
        let private = needed.saturating_sub(self.shared_blocks);
        state.private_blocks = state.private_blocks.saturating_sub(self.private_blocks) + private;
        self.private_blocks = private;
    }

    fn release_private_blocks(&mut self, state: &mut EngineState) {
        state.private_blocks = state.private_blocks.saturating_sub(self.private_blocks);
        self.private_blocks = 0;
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        let finished = self.phase == Phase::Done;
        // A cancelled request whose prefill ran keeps what it computed, as a real engine does.
        let computed = (self.phase == Phase::Decoding).then(|| self.computed_block_keys());
        let engine = Arc::clone(&self.engine);
        engine.with_state(|state| {
            if !finished {
                state.counters.requests_cancelled += 1;
            }
            self.release_private_blocks(state);
            if let Some(keys) = &computed {
                state.cache.insert(keys);
            }
            state.warmth.depart(Instant::now());
        });
        if !finished {
            tracing::debug!(
                worker = %self.engine.config.name,
                emitted = self.emitted,
                "request cancelled by client"
            );
        }
    }
}

#[cfg(test)]
#[path = "generation_tests.rs"]
mod tests;
