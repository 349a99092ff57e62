//! The request as routing and budgets see it: its route and the few fields read from it.

use serde::Deserialize;

use crate::error::ApiError;

/// Which endpoint a request came in on. Generation (chat, completions) goes through the
/// degrade stage's downgrade chain and response cache; the rest of the surface (`surface`)
/// is admitted, metered and routed by model the same way but forwarded as is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    ChatCompletions,
    Completions,
    Embeddings,
    Tokenize,
    Detokenize,
    Rerank,
    Score,
    Responses,
    /// Any other `POST /v1/*` path that names a model.
    Passthrough,
}

impl Route {
    /// The worker path when the client's own path is not forwarded.
    pub fn path(self) -> &'static str {
        match self {
            Route::ChatCompletions => "/v1/chat/completions",
            Route::Completions => "/v1/completions",
            Route::Embeddings => "/v1/embeddings",
            Route::Tokenize => "/tokenize",
            Route::Detokenize => "/detokenize",
            Route::Rerank => "/v1/rerank",
            Route::Score => "/v1/score",
            Route::Responses => "/v1/responses",
            Route::Passthrough => "/v1",
        }
    }

    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            Route::ChatCompletions => "chat_completions",
            Route::Completions => "completions",
            Route::Embeddings => "embeddings",
            Route::Tokenize => "tokenize",
            Route::Detokenize => "detokenize",
            Route::Rerank => "rerank",
            Route::Score => "score",
            Route::Responses => "responses",
            Route::Passthrough => "passthrough",
        }
    }

    /// Chat and completions: the routes the degradation front (downgrade chain, response
    /// cache, warmup resources) knows how to rewrite and answer.
    pub fn is_generation(self) -> bool {
        matches!(self, Route::ChatCompletions | Route::Completions)
    }
}

/// A streaming request's options: whether the client asked for the final usage chunk.
#[derive(Deserialize, Default)]
pub(super) struct StreamOptions {
    #[serde(default)]
    pub(super) include_usage: Option<bool>,
}

/// What routing needs to know about one request.
#[derive(Debug, PartialEq)]
pub struct ParsedRequest {
    pub model: String,
    pub stream: bool,
    /// Prompt text, chat messages flattened in order so each turn extends the previous prompt.
    pub prompt: String,
    pub user: Option<String>,
    /// `max_completion_tokens`, else `max_tokens`, if the client set one.
    pub max_tokens: Option<u64>,
    /// The client asked for the final usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
}

/// Prompt bytes per token when judging whether a request fits a worker's context.
const CONTEXT_BYTES_PER_TOKEN: u64 = 5;

impl ParsedRequest {
    /// Tokens to reserve before the worker reports real usage: about four bytes of prompt
    /// per token, plus the requested output (or `default_output` when none was asked for).
    /// Saturates: a client-chosen `max_tokens` can never wrap the reservation.
    pub fn estimated_tokens(&self, default_output: u64) -> u64 {
        (self.prompt.len() as u64)
            .div_ceil(4)
            .saturating_add(self.max_tokens.unwrap_or(default_output))
    }

    /// Context the request needs on a worker: its prompt, counted on the low side (five bytes
    /// per token, where English runs about four, so a request judged too long is too long by
    /// the engine's tokenizer too), plus its requested output (at least one token).
    pub fn context_needed(&self) -> u64 {
        (self.prompt.len() as u64 / CONTEXT_BYTES_PER_TOKEN)
            .saturating_add(self.max_tokens.unwrap_or(1).max(1))
    }

    /// The 400 for a request that fits in none of its model's workers (`longest`: the
    /// longest context among them).
    pub fn context_refusal(&self, longest: u64) -> ApiError {
        let needed = self.context_needed();
        ApiError::bad_request(
            "context_length_exceeded",
            format!(
                "this request needs at least {needed} tokens of context (prompt, estimated, plus `max_tokens`); the longest context among the workers serving `{}` is {longest}",
                self.model
            ),
        )
    }

    /// 400 when the request asks for more output tokens than `cap` allows.
    pub fn check_max_tokens(&self, cap: u64) -> Result<(), ApiError> {
        match self.max_tokens {
            Some(asked) if asked > cap => Err(ApiError::bad_request(
                "max_tokens_too_large",
                format!("`max_tokens` is {asked}; at most {cap} output tokens may be requested"),
            )),
            _ => Ok(()),
        }
    }
}

pub(crate) fn from_json<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => {
                ApiError::bad_request("invalid_request", format!("invalid request: {e}"))
            }
            Category::Syntax | Category::Eof | Category::Io => ApiError::bad_request(
                "invalid_json",
                format!("request body is not valid JSON: {e}"),
            ),
        }
    })
}
